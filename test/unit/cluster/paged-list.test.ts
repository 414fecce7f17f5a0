import { expect } from 'chai';
import { pageQuery, readPages, type ListPage, type PageReader } from '../../../src/cluster/paged-list.js';

/** A collection served in pages as the apiserver does: a continue token per page, the snapshot's RV on every page. */
function pagedServer(items: readonly number[], resourceVersion = '42') {
  const asked: { limit: number; continueToken: string | undefined }[] = [];
  const read: PageReader<number> = (page) => {
    asked.push(page);
    const from = page.continueToken === undefined ? 0 : Number(page.continueToken.replace('token-', ''));
    const to = Math.min(items.length, from + page.limit);
    const result: ListPage<number> = {
      items: items.slice(from, to),
      metadata: { resourceVersion, ...(to < items.length ? { _continue: `token-${to}` } : {}) },
    };
    return Promise.resolve(result);
  };
  return { read, asked };
}

describe('paged LIST', () => {
  it("reads every page in order with the server's continue tokens and returns the first page's resourceVersion", async () => {
    const items = Array.from({ length: 1_234 }, (_, index) => index);
    const { read, asked } = pagedServer(items);
    const seen: number[] = [];
    expect(await readPages(read, (item) => seen.push(item), new AbortController().signal)).to.equal('42');
    expect(seen).to.deep.equal(items);
    expect(asked).to.deep.equal([
      { limit: 500, continueToken: undefined },
      { limit: 500, continueToken: 'token-500' },
      { limit: 500, continueToken: 'token-1000' },
    ]);
  });

  it('stops on an empty continue token (what client-node decodes for none) and on an empty collection', async () => {
    const seen: string[] = [];
    const read: PageReader<string> = () =>
      Promise.resolve({ items: ['a'], metadata: { resourceVersion: '7', _continue: '' } });
    expect(await readPages(read, (item) => seen.push(item), new AbortController().signal, 10)).to.equal('7');
    expect(seen).to.deep.equal(['a']);
    const { read: empty } = pagedServer([]);
    expect(
      await readPages(
        empty,
        () => {
          throw new Error('no item expected');
        },
        new AbortController().signal,
      ),
    ).to.equal('42');
  });

  it('fails the whole LIST when a page fails (an expired continue token too) and stops once aborted', async () => {
    let calls = 0;
    const expired: PageReader<number> = (page) => {
      calls++;
      if (page.continueToken !== undefined)
        return Promise.reject(Object.assign(new Error('continue token expired'), { code: 410 }));
      return Promise.resolve({ items: [1], metadata: { resourceVersion: '1', _continue: 'next' } });
    };
    const error = await readPages(expired, () => undefined, new AbortController().signal).catch((e: unknown) => e);
    expect((error as Error).message).to.equal('continue token expired');
    expect(calls).to.equal(2);

    const controller = new AbortController();
    const { read, asked } = pagedServer(Array.from({ length: 30 }, (_, index) => index));
    const aborted = await readPages(
      read,
      (item) => {
        if (item === 9) controller.abort(new Error('stop'));
      },
      controller.signal,
      10,
    ).catch((e: unknown) => e);
    expect((aborted as Error).message).to.equal('stop');
    expect(asked).to.have.length(1);
  });

  it("pageQuery: the typed client's limit and _continue", () => {
    expect(pageQuery({ limit: 500, continueToken: undefined })).to.deep.equal({ limit: 500 });
    expect(pageQuery({ limit: 5, continueToken: 'abc' })).to.deep.equal({ limit: 5, _continue: 'abc' });
  });
});
