import { expect } from 'chai';
import { forEachInSlices, jsonPieces, mapInSlices, stringifyInSlices } from '../../../src/base/time-slices.js';

describe('time slices: long work that lets the event loop breathe', () => {
  it('encodes plain data exactly as JSON.stringify, Maps as objects', async () => {
    const big = Array.from({ length: 5000 }, (_, index) => ({ Host: `n${index}`, Score: index % 11 }));
    const samples: unknown[] = [
      null,
      0,
      -1.5,
      'a"b\u2028',
      true,
      [],
      {},
      [1, 'x', null, [2, {}]],
      { a: 1, b: undefined, c: () => 1, d: [undefined], e: { f: 'g' } },
      big,
      { Nodes: null, NodeNames: big.map((entry) => entry.Host), Error: '' },
      new Date(0),
      { when: new Date(0) },
    ];
    for (const sample of samples) expect(await stringifyInSlices(sample)).to.equal(JSON.stringify(sample));
    const map = new Map(
      Array.from({ length: 4500 }, (_, index) => [
        `node-${index}`,
        index % 2 === 0 ? 'node unregistered' : '1/4 CardInsufficientMemory',
      ]),
    );
    expect(await stringifyInSlices({ FailedNodes: map, Empty: new Map(), Error: '' })).to.equal(
      JSON.stringify({ FailedNodes: Object.fromEntries(map), Empty: {}, Error: '' }),
    );
  });

  it('yields to other callbacks while encoding 100,000 entries', async () => {
    const map = new Map(Array.from({ length: 100_000 }, (_, index) => [`unknown-node-${index}`, 'node unregistered']));
    let turns = 0;
    const ticker = setInterval(() => {
      turns += 1;
    }, 0);
    let pieces = 0;
    for await (const piece of jsonPieces({ FailedNodes: map })) pieces += piece.length > 0 ? 1 : 0;
    clearInterval(ticker);
    expect(pieces).to.be.above(50);
    expect(turns).to.be.above(10);
  });

  it('runs work over a list in order, in slices, and maps it', async () => {
    const seen: number[] = [];
    let turns = 0;
    const ticker = setInterval(() => {
      turns += 1;
    }, 0);
    await forEachInSlices(
      Array.from({ length: 20_000 }, (_, index) => index),
      (item) => {
        const until = performance.now() + 0.01;
        while (performance.now() < until) {
          /* busy: 20,000 × 10 µs = 200 ms of work */
        }
        seen.push(item);
      },
      2,
    );
    clearInterval(ticker);
    expect(seen).to.have.length(20_000);
    expect(seen.every((item, index) => item === index)).to.equal(true);
    expect(turns).to.be.above(10);
    expect(await mapInSlices(['a', 'b'], (item, index) => `${item}${index}`)).to.deep.equal(['a0', 'b1']);
  });
});
