import { expect } from 'chai';
import { NodeShapeCache } from '../../../src/extender/node-shape-cache.js';

describe('NodeShapeCache (values per node and pod shape, while the node generation holds)', () => {
  it('answers a value only at the generation it was kept at', () => {
    const cache = new NodeShapeCache<number>(4);
    cache.set('n1', 7, 'shape-a', 40);
    expect(cache.get('n1', 7, 'shape-a')).to.equal(40);
    expect(cache.get('n1', 8, 'shape-a')).to.equal(undefined);
    expect(cache.get('n2', 7, 'shape-a')).to.equal(undefined);
    cache.set('n1', 8, 'shape-b', 3);
    expect(cache.get('n1', 7, 'shape-a'), 'a new generation drops the old values').to.equal(undefined);
  });

  it('keeps at most the given number of shapes per node, the oldest out first', () => {
    const cache = new NodeShapeCache<string>(2);
    cache.set('n1', 1, 'a', 'A');
    cache.set('n1', 1, 'b', 'B');
    cache.set('n1', 1, 'a', 'A2');
    cache.set('n1', 1, 'c', 'C');
    expect([cache.get('n1', 1, 'a'), cache.get('n1', 1, 'b'), cache.get('n1', 1, 'c')]).to.deep.equal([undefined, 'B', 'C']);
  });
});
