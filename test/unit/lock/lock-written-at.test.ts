import { expect } from 'chai';
import { lockWrittenAt } from '../../../src/lock/lock-written-at.js';

const owning = (time: unknown) => ({
  manager: 'm',
  operation: 'Update',
  time,
  fieldsV1: { 'f:metadata': { 'f:annotations': { 'f:hami.io/mutex.lock': {} } } },
});

describe("lockWrittenAt (the apiserver's record of the lock write)", () => {
  it('takes the newest managedFields entry that manages the lock annotation, ignoring the others', () => {
    const node = {
      metadata: {
        managedFields: [
          owning('2026-11-30T11:00:00Z'),
          { manager: 'kubelet', time: '2026-11-30T11:59:00Z', fieldsV1: { 'f:status': {} } },
          {
            manager: 'plugin',
            time: '2026-11-30T11:58:00Z',
            fieldsV1: { 'f:metadata': { 'f:annotations': { 'f:hami.io/node-nvidia-register': {} } } },
          },
          owning(new Date('2026-11-30T11:30:00Z')),
        ],
      },
    };
    expect(lockWrittenAt(node)?.toISOString()).to.equal('2026-11-30T11:30:00.000Z');
  });

  for (const node of [
    undefined,
    null,
    'node',
    {},
    { metadata: {} },
    { metadata: { managedFields: 'x' } },
    { metadata: { managedFields: [null, 3, owning('not a time'), owning(undefined)] } },
  ]) {
    it(`is undefined, never a throw, for ${JSON.stringify(node)}`, () => {
      expect(lockWrittenAt(node)).to.equal(undefined);
    });
  }
});
