import type { CoreV1EventList } from '@kubernetes/client-node';
import { expect } from 'chai';
import { listEventDigest, type EventPageReader } from '../../../src/local/event-feed.js';

/** A reader serving `total` Events in pages, named so that key order is the reverse of time order. */
function pagedReader(total: number, calls: { limit: number; continueToken: string | undefined }[]): EventPageReader {
  const items = Array.from({ length: total }, (_, index) => ({
    metadata: {
      name: `ev-${String(total - index).padStart(5, '0')}`,
      namespace: 'default',
      uid: `u${index}`,
      resourceVersion: String(100 + index),
    },
    involvedObject: { kind: 'Pod', namespace: 'default', name: index === 3 ? 'stuck' : 'p' },
    reason: index === 3 ? 'FilteringFailed' : 'Scheduled',
    message: `m${index}`,
    lastTimestamp: new Date(Date.UTC(2026, 11, 1, 10, 0, 0) + index * 1000),
  })).sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  return (page) => {
    calls.push(page);
    const start = page.continueToken === undefined ? 0 : Number(page.continueToken);
    const end = start + page.limit;
    const list: CoreV1EventList = {
      items: items.slice(start, end),
      metadata: { resourceVersion: '999', _continue: end < items.length ? String(end) : '' },
    };
    return Promise.resolve(list);
  };
}

describe('live view event LIST', () => {
  it('reads every page with continue and keeps the newest events, not the first page by key', async () => {
    const calls: { limit: number; continueToken: string | undefined }[] = [];
    const { items, resourceVersion } = await listEventDigest(
      pagedReader(1200, calls),
      { recent: 200, pods: 10 },
      new AbortController().signal,
      500,
    );
    expect(calls.map((call) => call.continueToken)).to.deep.equal([undefined, '500', '1000']);
    expect(calls.every((call) => call.limit === 500)).to.equal(true);
    expect(resourceVersion).to.equal('999');
    const messages = new Set(items.map((event) => event.message));
    // The newest 200 (indexes 1000..1199) and the old pending reason of pod "stuck" (index 3).
    expect(items).to.have.length(201);
    expect(messages.has('m1199') && messages.has('m1000') && messages.has('m3')).to.equal(true);
    expect(messages.has('m999')).to.equal(false);
  });

  it('refuses a LIST without a resourceVersion (nothing to watch from)', async () => {
    const reader: EventPageReader = () => Promise.resolve({ items: [], metadata: {} });
    let error: unknown;
    await listEventDigest(reader, { recent: 10, pods: 10 }, new AbortController().signal).catch((caught: unknown) => {
      error = caught;
    });
    expect(String(error)).to.match(/without a resourceVersion/);
  });
});
