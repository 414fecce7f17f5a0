import { expect } from 'chai';
import type { LockRow } from '../../../src/lock/lock-report.js';
import { liveEventOf, type LiveEvent } from '../../../src/local/live-events.js';
import { lockLine, printable, renderLiveView, wrapped, type LiveViewState } from '../../../src/local/live-view.js';

const now = new Date('2026-11-30T12:00:00Z');
const inventory = {
  devices: [
    {
      uuid: 'GPU-n1-0',
      index: 0,
      count: 10,
      memoryMiB: 24576,
      cores: 100,
      type: 'NVIDIA-A10',
      numa: 0,
      mode: 'hami-core',
      healthy: true,
      cordoned: false,
    },
  ],
  problems: [],
};
const EXPORT = 'export KUBECONFIG=/tmp/vgpu-warden-local-abc123/kubeconfig';

function lockRow(partial: Partial<LockRow>): LockRow {
  return {
    node: 'gpu-node-1',
    value: '2026-11-30T11:59:48Z,default,trainer',
    holder: { namespace: 'default', name: 'trainer' },
    kind: 'owned',
    ageSeconds: 12,
    state: 'held',
    reason: 'bind-in-progress',
    owner: null,
    ...partial,
  };
}

function event(index: number, extra: Record<string, unknown> = {}): LiveEvent {
  return liveEventOf({
    metadata: { name: `e${index}`, namespace: 'default', uid: `u${index}`, resourceVersion: String(index) },
    involvedObject: { kind: 'Pod', namespace: 'default', name: `pod-${index}` },
    reason: 'Scheduled',
    message: `event number ${index}`,
    lastTimestamp: new Date(now.getTime() - (1000 - index) * 1000).toISOString(),
    ...extra,
  });
}

function state(partial: Partial<LiveViewState> = {}): LiveViewState {
  return {
    now,
    kubeconfigExport: EXPORT,
    demo: undefined,
    notes: [],
    nodes: [
      {
        name: 'gpu-node-1',
        inventory,
        usage: new Map([['GPU-n1-0', { slots: 2, memoryMiB: 12288, cores: 50 }]]),
        lock: lockRow({}),
      },
    ],
    pending: [],
    events: [],
    ...partial,
  };
}

describe('local live view rendering', () => {
  it('shows GPU use, the lock with state, holder, age and reason, and says when there are no events', () => {
    const text = renderLiveView(state(), { columns: 200, rows: 40 }).join('\n');
    expect(text).to.include(
      'gpu-node-1  held  default/trainer  12s  bind-in-progress: a bind to this node is in progress',
    );
    expect(text)
      .to.include('mem [#####.....]  12288/24576 MiB')
      .and.include('cores [#####.....]  50%')
      .and.include('tasks 2/10');
    expect(text).to.include('(none yet)');
  });

  it('keeps the export line and the latest demo result at the top of every frame, however many events', () => {
    const demo =
      'seed demo: replacement pod seed-replacement bound to gpu-node-1 and allocated 412 ms after the delete';
    const events = Array.from({ length: 200 }, (_, index) => event(index));
    const lines = renderLiveView(state({ demo, events, notes: ['local: press Ctrl-C to stop'] }), {
      columns: 120,
      rows: 24,
    });
    expect(lines).to.have.length.at.most(24);
    expect(lines[1]).to.equal(EXPORT);
    expect(lines[2]).to.equal(demo.slice(0, 120));
    expect(lines.join('\n')).to.include('local: press Ctrl-C to stop');
    // The newest events are the ones that fit, newest last; the older ones are counted.
    expect(lines.at(-1)).to.include('event number 199');
    expect(lines.join('\n')).to.not.include('event number 150');
    expect(lines.join('\n')).to.match(/… \d+ older/);
  });

  it('wraps a long export line over rows instead of cutting it, and clips every other row to the width', () => {
    const longExport = `export KUBECONFIG=/${'very-long-directory/'.repeat(8)}kubeconfig`;
    const lines = renderLiveView(
      state({ kubeconfigExport: longExport, events: [event(1, { message: 'x'.repeat(500) })] }),
      { columns: 60, rows: 30 },
    );
    expect(lines.every((line) => line.length <= 60)).to.equal(true);
    expect(lines.slice(1, 1 + Math.ceil(longExport.length / 60)).join('')).to.equal(longExport);
    expect(lines.find((line) => line.includes('Scheduled'))).to.match(/…$/);
  });

  it('wraps the demo result at spaces, and a path without spaces at the width', () => {
    expect(wrapped('seed demo: bound after 91 ms', 12)).to.deep.equal(['seed demo:', 'bound after', '91 ms']);
    expect(wrapped('export X=/aaaaaaaaaaaaaaaa', 10)).to.deep.equal(['export', 'X=/aaaaaaa', 'aaaaaaaaa']);
    expect(wrapped('short', 10)).to.deep.equal(['short']);
    expect(wrapped('export X=/a b/c', 10, false)).to.deep.equal(['export X=/', 'a b/c']);
  });

  it('shows stalled and releasable locks with what the lock rules say', () => {
    expect(
      lockLine(
        'gpu-node-1',
        lockRow({ state: 'stalled', reason: 'awaiting-allocation-past-expiry', ageSeconds: 1980 }),
      ),
    ).to.equal(
      'gpu-node-1  stalled  default/trainer  33m  awaiting-allocation-past-expiry: bound here, no Allocate within NODELOCK_EXPIRE; kept, not taken over (HAMi #3096)',
    );
    expect(
      lockLine('gpu-node-2', lockRow({ state: 'releasable', reason: 'owner-not-found', ageSeconds: 40 })),
    ).to.equal(
      'gpu-node-2  releasable  default/trainer  40s  owner-not-found: the pod named by the lock does not exist; the sweeper or the next bind frees it',
    );
    expect(
      lockLine(
        'gpu-node-3',
        lockRow({ holder: null, kind: 'legacy', state: 'held', reason: 'legacy-fresh', ageSeconds: 5 }),
      ),
    ).to.include('<legacy>  5s  legacy-fresh');
    expect(lockLine('gpu-node-4', undefined)).to.equal('gpu-node-4  unlocked');
  });

  it('lists pending GPU pods with their latest scheduling reason, clipped', () => {
    const reason = liveEventOf({
      metadata: { uid: 'r', resourceVersion: '5' },
      involvedObject: { kind: 'Pod', namespace: 'default', name: 'big' },
      reason: 'FilteringFailed',
      message: `2 nodes CardInsufficientMemory (gpu-node-1, gpu-node-2)${' and more'.repeat(60)}`,
      count: 4,
    });
    const text = renderLiveView(
      state({
        pending: [
          { namespace: 'default', name: 'big', createdAt: new Date(now.getTime() - 41_000), reason },
          { namespace: 'team', name: 'new', createdAt: new Date(now.getTime() - 2_000), reason: undefined },
        ],
      }),
      { columns: 400, rows: 40 },
    ).join('\n');
    expect(text).to.include('pending GPU pods (2):');
    expect(text).to.match(
      new RegExp(
        /default\/big {2}41s {2}FilteringFailed: /.source +
          /2 nodes CardInsufficientMemory \(gpu-node-1, gpu-node-2\)( and more)+[ a-z]*… \(x4\)/.source,
      ),
    );
    expect(text).to.include('team/new  2s  no scheduling event yet');
  });

  it('turns control characters from the cluster into spaces, so an event cannot drive the terminal', () => {
    expect(printable('a\u001b[2Jb\nc\u009bd')).to.equal('a [2Jb c d');
    const lines = renderLiveView(state({ events: [event(1, { message: 'evil\u001b]0;title\u0007 text' })] }), {
      columns: 200,
      rows: 40,
    });
    expect(lines.find((line) => line.includes('evil'))).to.include('evil ]0;title  text');
    // eslint-disable-next-line no-control-regex
    expect(lines.filter((line) => /[\u0000-\u001f]/.test(line))).to.deep.equal([]);
  });

  it('never returns more rows than the screen has, header first', () => {
    const lines = renderLiveView(state({ events: [event(1)] }), { columns: 80, rows: 3 });
    expect(lines.length).to.be.within(2, 3);
    expect(lines[1]).to.equal(EXPORT);
  });
});
