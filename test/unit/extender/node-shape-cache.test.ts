import { expect } from 'chai';
import { NodeShapeCache } from '../../../src/extender/node-shape-cache.js';

describe('NodeShapeCache (values per pod shape and node, while the node generation holds)', () => {
  it('answers a value only at the generation it was kept at', () => {
    const cache = new NodeShapeCache<number>(4);
    cache.set('n1', 7, 'shape-a', 40);
    expect(cache.get('n1', 7, 'shape-a')).to.equal(40);
    expect(cache.get('n1', 8, 'shape-a'), 'the node moved on').to.equal(undefined);
    expect(cache.get('n2', 7, 'shape-a'), 'another node').to.equal(undefined);
    expect(cache.get('n1', 7, 'shape-b'), 'another shape').to.equal(undefined);
  });

  it('rewrites a node entry in place when its generation moves on', () => {
    const values = new NodeShapeCache<string>(4).forShape('a');
    values.set('n1', 1, 'old');
    values.set('n1', 2, 'new');
    expect(values.size).to.equal(1);
    expect([values.get('n1', 1), values.get('n1', 2)]).to.deep.equal([undefined, 'new']);
  });

  it('keeps at most the given number of shapes, the least recently used out first', () => {
    const cache = new NodeShapeCache<string>(2);
    cache.set('n1', 1, 'a', 'A');
    cache.set('n1', 1, 'b', 'B');
    cache.set('n2', 1, 'a', 'A2');
    cache.set('n1', 1, 'c', 'C');
    expect([cache.get('n1', 1, 'b'), cache.get('n2', 1, 'a'), cache.get('n1', 1, 'c')]).to.deep.equal([
      undefined,
      'A2',
      'C',
    ]);
    expect(cache.get('n1', 1, 'a'), 'shape a was used after b, so b went').to.equal('A');
  });

  it('clear forgets every node of one shape and no other', () => {
    const cache = new NodeShapeCache<string>(4);
    cache.set('n1', 1, 'a', 'A');
    cache.set('n1', 1, 'b', 'B');
    cache.forShape('a').clear();
    expect([cache.forShape('a').size, cache.get('n1', 1, 'a'), cache.get('n1', 1, 'b')]).to.deep.equal([
      0,
      undefined,
      'B',
    ]);
  });
});
