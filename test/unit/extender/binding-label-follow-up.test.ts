import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { BindingLabelFollowUp, kubeLabelPatch, type BoundPod } from '../../../src/extender/binding-label-follow-up.js';

type Change = 'add' | 'update' | 'delete';

/** The state store as the follow-up reads it: pods by name and a change feed. */
class PodStore {
  readonly pods = new Map<string, V1Pod>();
  private readonly listeners = new Set<(pod: V1Pod, change: Change) => void>();

  pod(namespace: string, name: string): V1Pod | undefined {
    return this.pods.get(`${namespace}/${name}`);
  }

  onPodChange(listener: (pod: V1Pod, change: Change) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  put(pod: V1Pod, change: Change = 'update'): void {
    const key = `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
    if (change === 'delete') this.pods.delete(key);
    else this.pods.set(key, pod);
    for (const listener of this.listeners) listener(pod, change);
  }
}

function pod(options: { uid?: string; node?: string; label?: string } = {}): V1Pod {
  return {
    metadata: {
      namespace: 'ns',
      name: 'train-0',
      uid: options.uid ?? 'uid-1',
      ...(options.label === undefined ? {} : { labels: { 'hami.io/vgpu-node': options.label } }),
    },
    spec: { containers: [{ name: 'c' }], ...(options.node === undefined ? {} : { nodeName: options.node }) },
  };
}

const bound: BoundPod = { namespace: 'ns', name: 'train-0', uid: 'uid-1', node: 'gpu-1' };
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("BindingLabelFollowUp (hami.io/vgpu-node where the apiserver dropped the Binding's labels)", () => {
  let store: PodStore;
  let patched: BoundPod[];
  let logged: string[];
  let followUp: BindingLabelFollowUp;
  const make = (options: { settleMs?: number; maxFollowed?: number; fail?: boolean } = {}) => {
    followUp = new BindingLabelFollowUp({
      pods: store,
      patchLabel: (target) => {
        patched.push(target);
        return options.fail === true ? Promise.reject(new Error('409 uid precondition')) : Promise.resolve();
      },
      log: (message) => {
        logged.push(message);
      },
      ...(options.settleMs === undefined ? {} : { settleMs: options.settleMs }),
      ...(options.maxFollowed === undefined ? {} : { maxFollowed: options.maxFollowed }),
    });
    followUp.start();
    return followUp;
  };
  beforeEach(() => {
    store = new PodStore();
    patched = [];
    logged = [];
  });
  afterEach(() => {
    followUp.stop();
  });

  it('writes nothing when the pod arrives bound with the label (kube-apiserver 1.35+ copied it from the Binding)', () => {
    make().follow(bound);
    store.put(pod({ node: 'gpu-1', label: 'gpu-1' }));
    expect(patched).to.deep.equal([]);
    expect(followUp.size).to.equal(0);
  });

  it("patches once when the pod arrives bound without it (an apiserver that drops a Binding's labels)", () => {
    make().follow(bound);
    store.put(pod());
    expect(patched, 'not bound yet: wait').to.deep.equal([]);
    store.put(pod({ node: 'gpu-1' }));
    store.put(pod({ node: 'gpu-1' }));
    expect(patched).to.deep.equal([bound]);
    expect(followUp.size).to.equal(0);
  });

  it('decides at once when the store saw the Binding before its answer came back', () => {
    store.put(pod({ node: 'gpu-1' }));
    make().follow(bound);
    expect(patched).to.deep.equal([bound]);
    store.put(pod({ node: 'gpu-1', label: 'gpu-1' }));
    make().follow(bound);
    expect(patched).to.have.length(1);
  });

  it('labels nothing for a pod deleted, recreated under its name, or bound elsewhere', () => {
    make().follow(bound);
    store.put(pod(), 'delete');
    make().follow(bound);
    store.put(pod({ uid: 'uid-2', node: 'gpu-1' }));
    expect(followUp.size, 'another incarnation is not this one').to.equal(1);
    store.put(pod({ node: 'gpu-2' }));
    expect(patched).to.deep.equal([]);
    expect(followUp.size).to.equal(0);
  });

  it('patches anyway when the store does not show the pod bound within settleMs, unless it was replaced meanwhile', async () => {
    make({ settleMs: 20 }).follow(bound);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(patched).to.deep.equal([bound]);
    store.put(pod({ uid: 'uid-2' }));
    followUp.follow(bound);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(patched).to.have.length(1);
    expect(followUp.size).to.equal(0);
  });

  it('past maxFollowed, or before start, patches at once instead of following (bounded memory)', () => {
    make({ maxFollowed: 1 }).follow(bound);
    followUp.follow({ ...bound, name: 'train-1', uid: 'uid-b' });
    expect(patched.map((target) => target.name)).to.deep.equal(['train-1']);
    followUp.stop();
    followUp.follow({ ...bound, name: 'train-2', uid: 'uid-c' });
    expect(patched.map((target) => target.name)).to.deep.equal(['train-1', 'train-2']);
  });

  it('logs a failed patch and goes on: the bind stands without its label', async () => {
    make({ fail: true }).follow(bound);
    store.put(pod({ node: 'gpu-1' }));
    await tick();
    expect(logged).to.have.length(1);
    expect(logged[0])
      .to.include('could not label ns/train-0 with hami.io/vgpu-node')
      .and.include('409 uid precondition');
  });

  it('stop forgets every pod and cancels its timer', async () => {
    make({ settleMs: 20 }).follow(bound);
    followUp.stop();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(patched).to.deep.equal([]);
    expect(followUp.size).to.equal(0);
  });

  it('kubeLabelPatch sends a merge patch of the label with the uid as precondition', async () => {
    const calls: unknown[] = [];
    const core = {
      patchNamespacedPod: (request: unknown) => {
        calls.push(request);
        return Promise.resolve({});
      },
    };
    await kubeLabelPatch(core)(bound);
    expect(calls).to.deep.equal([
      {
        name: 'train-0',
        namespace: 'ns',
        body: { metadata: { uid: 'uid-1', labels: { 'hami.io/vgpu-node': 'gpu-1' } } },
      },
    ]);
  });
});
