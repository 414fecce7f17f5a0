import { expect } from 'chai';
import { ObjectStore } from '../../../src/cluster/object-store.js';
import { isAtLeastVersion, isNewerVersion } from '../../../src/base/resource-version.js';

const pod = (name: string, uid: string, resourceVersion = '1') => ({
  metadata: { name, namespace: 'ns', uid, resourceVersion },
});

describe('ObjectStore (relists reconciled by UID)', () => {
  it('a relist that shows a same-name pod with a new UID is a delete of the old incarnation and an add of the new', () => {
    const store = new ObjectStore<ReturnType<typeof pod>>();
    store.replace([pod('sts-0', 'old'), pod('keep', 'k')]);
    const changes = store.replace([pod('sts-0', 'new'), pod('keep', 'k')]);
    expect(changes.map((change) => [change.type, change.object.metadata.uid])).to.deep.equal([
      ['delete', 'old'],
      ['add', 'new'],
    ]);
    expect(store.get('ns/sts-0')?.metadata.uid).to.equal('new');
  });

  it('a relist deletes what is gone, updates what changed and leaves unchanged objects silent', () => {
    const store = new ObjectStore<ReturnType<typeof pod>>();
    store.replace([pod('a', 'a'), pod('b', 'b'), pod('c', 'c')]);
    const changes = store.replace([pod('b', 'b', '2'), pod('c', 'c')]);
    expect(changes.map((change) => `${change.type}:${change.object.metadata.name}`)).to.deep.equal([
      'delete:a',
      'update:b',
    ]);
    expect(store.size).to.equal(2);
  });

  it('a watch MODIFIED carrying a new UID under a known name is a delete plus an add', () => {
    const store = new ObjectStore<ReturnType<typeof pod>>();
    store.apply('ADDED', pod('p', 'one'));
    expect(store.apply('MODIFIED', pod('p', 'two')).map((change) => change.type)).to.deep.equal(['delete', 'add']);
  });

  it('DELETED of an unknown object changes nothing; objects without a name are ignored', () => {
    const store = new ObjectStore<ReturnType<typeof pod>>();
    expect(store.apply('DELETED', pod('ghost', 'g'))).to.deep.equal([]);
    expect(
      store.apply('ADDED', { metadata: { name: '', namespace: 'ns', uid: 'x', resourceVersion: '1' } }),
    ).to.deep.equal([]);
  });

  it('our own write is taken only when its resourceVersion is newer than the stored one', () => {
    const store = new ObjectStore<ReturnType<typeof pod>>();
    store.apply('ADDED', pod('n', 'u', '10'));
    expect(store.observeWrite(pod('n', 'u', '9'))).to.deep.equal([]);
    expect(store.observeWrite(pod('n', 'u', '11'))).to.have.length(1);
    expect(store.get('ns/n')?.metadata.resourceVersion).to.equal('11');
    expect(store.observeWrite(pod('n', 'other', '12'))).to.deep.equal([]);
  });
});

describe('resourceVersion comparisons (integers from etcd; anything else is never "newer" or "at least")', () => {
  it('isAtLeastVersion: equal and larger are at least; smaller, missing and opaque versions are not', () => {
    expect(isAtLeastVersion('20', '20')).to.equal(true);
    expect(isAtLeastVersion('100', '99')).to.equal(true);
    expect(isAtLeastVersion('99', '100')).to.equal(false);
    expect(isAtLeastVersion(undefined, '1')).to.equal(false);
    expect(isAtLeastVersion('abc', '1')).to.equal(false);
    expect(isAtLeastVersion('18446744073709551617', '18446744073709551616'), 'beyond 2^53').to.equal(true);
  });

  it('isNewerVersion: strictly larger only', () => {
    expect(isNewerVersion('21', '20')).to.equal(true);
    expect(isNewerVersion('20', '20')).to.equal(false);
    expect(isNewerVersion('7', 'x')).to.equal(false);
  });
});
