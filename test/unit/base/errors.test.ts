import { expect } from 'chai';
import { describeError } from '../../../src/base/errors.js';

describe('describeError', () => {
  it('renders the cause chain on one line', () => {
    expect(describeError(new Error('outer', { cause: new Error('inner', { cause: 'root' }) }))).to.equal(
      'outer: caused by: inner: caused by: root',
    );
  });

  it('says a cause once when its wrapper already quotes it (a bind that waited, then gave up)', () => {
    const waited = new Error('node n is locked by pod ns/a; ns/b must wait');
    expect(describeError(new Error(`${waited.message} (waited 10s)`, { cause: waited }))).to.equal(
      'node n is locked by pod ns/a; ns/b must wait (waited 10s)',
    );
  });
});
