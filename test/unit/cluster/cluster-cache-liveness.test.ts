import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import { requestingStamp } from '../../../src/cluster/node-liveness.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import { ScriptedSource } from '../../support/scripted-source.js';
import { NODE_HANDSHAKE_ANNOTATION } from '../../../src/hami/wire.js';
import { until } from '../../support/eventually.js';

/** The node as kubelet publishes it with `allocatable` nvidia.com/gpu (undefined: none) and a handshake. */
function node(version: string, allocatable: string | undefined, handshake?: string): V1Node {
  const base = simulatedGpuNode({ name: 'gpu-1', gpus: 1 });
  const resources: Record<string, string> = { ...base.status?.allocatable };
  if (allocatable === undefined) delete resources['nvidia.com/gpu'];
  else resources['nvidia.com/gpu'] = allocatable;
  return {
    ...base,
    metadata: {
      ...base.metadata,
      resourceVersion: version,
      annotations: {
        ...base.metadata?.annotations,
        ...(handshake === undefined ? {} : { [NODE_HANDSHAKE_ANNOTATION]: handshake }),
      },
    },
    status: { ...base.status, allocatable: resources },
  };
}

describe('ClusterCache: device-plugin liveness per node', () => {
  let cache: ClusterCache | undefined;
  afterEach(async () => {
    await cache?.stop();
    cache = undefined;
  });

  function build(first: V1Node, clock: () => number) {
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = [first];
    cache = new ClusterCache({
      sources: { nodes, pods },
      clock,
      reflector: { initialBackoffMs: 5, maxBackoffMs: 10, jitter: 0 },
    });
    return { nodes, cache };
  }

  it('a node whose plugin stops reporting is not ready from that event on, naming when, and is ready again when it reports; each change moves the node generation', async () => {
    let now = Date.UTC(2026, 11, 1, 9, 0, 0);
    const { nodes, cache } = build(node('1', '10'), () => now);
    await cache.start();
    expect(cache.gpuLiveness('gpu-1')).to.deep.equal({ ready: true, via: 'allocatable' });
    const before = cache.nodeGeneration('gpu-1');

    now += 1_000;
    nodes.emit('MODIFIED', node('2', '0'));
    await until('the drop to zero', () => !cache.gpuLiveness('gpu-1').ready);
    const dead = cache.gpuLiveness('gpu-1');
    expect(!dead.ready && dead.reason).to.equal(
      'device plugin stopped reporting since 2026-12-01T09:00:01Z (status.allocatable["nvidia.com/gpu"] is 0, no handshake)',
    );
    const deadGeneration = cache.nodeGeneration('gpu-1');
    expect(deadGeneration).to.not.equal(before);

    // Unrelated updates (a heartbeat) keep the verdict, its "since", and the generation.
    now += 30_000;
    nodes.emit('MODIFIED', node('3', '0'));
    await until('the heartbeat', () => cache.node('gpu-1')?.metadata?.resourceVersion === '3');
    expect(cache.gpuLiveness('gpu-1')).to.deep.equal(dead);
    expect(cache.nodeGeneration('gpu-1')).to.equal(deadGeneration);

    // A fresh handshake request gives no grace to a plugin that has stopped (HAMi: unhealthy at once).
    nodes.emit('MODIFIED', node('4', '0', requestingStamp(new Date(now))));
    await until('the handshake', () => cache.node('gpu-1')?.metadata?.resourceVersion === '4');
    expect(cache.gpuLiveness('gpu-1').ready).to.equal(false);

    nodes.emit('MODIFIED', node('5', '10'));
    await until('the plugin reporting again', () => cache.gpuLiveness('gpu-1').ready);
    expect(cache.nodeGeneration('gpu-1')).to.not.equal(deadGeneration);
  });

  it("a plugin not reported yet gets HAMi's 60 s handshake grace; when it lapses the generation moves without any event", async () => {
    let now = Date.UTC(2026, 11, 1, 9, 0, 0);
    const { cache } = build(node('1', undefined, requestingStamp(new Date(now - 20_000))), () => now);
    await cache.start();
    expect(cache.gpuLiveness('gpu-1')).to.deep.include({ ready: true, via: 'handshake' });
    const during = cache.nodeGeneration('gpu-1');
    now += 39_999;
    expect(cache.nodeGeneration('gpu-1')).to.equal(during);
    now += 1;
    expect(cache.nodeGeneration('gpu-1'), 'filter verdicts cached for the node must lapse').to.not.equal(during);
    const lapsed = cache.gpuLiveness('gpu-1');
    expect(!lapsed.ready && lapsed.reason).to.match(
      new RegExp(
        /^device plugin not reporting since 2026-12-01T09:00:00Z \(no status\.allocatable\["nvidia\.com\/gpu"\], /
          .source + /handshake requested at 2026-12-01T08:59:40Z and not answered within 60s\)$/.source,
      ),
    );
  });

  it('an unknown node is not ready, as unregistered', async () => {
    const { cache } = build(node('1', '10'), Date.now);
    await cache.start();
    expect(cache.gpuLiveness('nope')).to.deep.equal({ ready: false, reason: 'node unregistered', since: undefined });
  });
});
