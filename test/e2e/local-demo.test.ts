import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoreV1Api, loadYaml, type V1Pod } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../src/kube/client.js';
import { spawnCaptured } from '../support/captured-process.js';
import { eventually, notYet } from '../support/test-cluster.js';
import { expect } from 'chai';

const repoRoot = resolve(import.meta.dirname, '..', '..');
const main = resolve(repoRoot, 'src', 'main.ts');
/** `vgpu-warden local` from the sources; test/unit/docs/commands-run-by.ts finds the README command by this line. */
const spawnLocal = (args: string[]) => spawnCaptured(process.execPath, ['--import', 'tsx', main, 'local', ...args]);

/** kubelet and containerd processes of real nodes on this machine (their command lines). */
function realNodeProcesses(): string[] {
  return execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => /vgpu-warden-rn-.*(kubelet|containerd)/.test(line));
}

/** The run folder (vgpu-warden-rn-XXXXXX) a real node's process belongs to. */
function runFolderOf(line: string): string {
  return /vgpu-warden-rn-[A-Za-z0-9]+/.exec(line)?.[0] ?? line;
}

describe('vgpu-warden local on real and simulated nodes (the README main job, headless)', function () {
  this.timeout(180_000);

  /** Runs `local` headless with `args` until it exits; its whole output. */
  async function runLocal(args: string[]): Promise<{ code: number | null; output: string }> {
    const local = spawnLocal(args);
    const { code } = await local.exited;
    const output = local.output();
    console.log(
      output
        .split('\n')
        .filter((line) => line.includes('seed demo') || line.includes(' nodes'))
        .map((line) => `        ${line}`)
        .join('\n'),
    );
    return { code, output };
  }

  /** Starts `local` with `args`; `ready` resolves once it is up (or it exited); `interrupt` is Ctrl-C. */
  function startLocal(args: string[]) {
    const local = spawnLocal(args);
    const { child, output, exited } = local;
    const up = new Promise<void>((done) => {
      // After the capture's own listeners, so output() already holds the chunk.
      const onData = () => {
        if (output().includes('press Ctrl-C to stop')) done();
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
    });
    return {
      ready: Promise.race([up, exited]).then(() => undefined),
      output,
      /** SIGINT, then the exit code and what it printed while stopping. */
      interrupt: async () => {
        const before = output().length;
        child.kill('SIGINT');
        const { code } = await exited;
        return { code, stopping: output().slice(before), output: output() };
      },
    };
  }

  it('on simulated nodes: both variants of the seed scenario, each replacement bound and allocated, each with what HAMi v2.10 does; exits 0', async () => {
    const { code, output } = await runLocal([
      '--nodes',
      'simulated',
      '--demo',
      'seed',
      '--exit-after-demo',
      '--gpu-nodes',
      '1',
      '--no-view',
    ]);
    expect(code, output).to.equal(0);
    expect(output).to.match(/local: simulated nodes, as --nodes=simulated asks/);
    for (const variant of ['force', 'graceful']) {
      const bound = new RegExp(
        `seed demo \\(${variant} delete\\): replacement pod seed-replacement-${variant} bound to gpu-node-1 and allocated (\\d+) ms after the delete`,
      ).exec(output);
      expect(bound, output).to.not.equal(null);
      expect(Number(bound?.[1])).to.be.below(10_000);
    }
    expect(output).to.include('HAMi v2.10 frees it at its next bind to the node');
    expect(output).to.include('HAMi v2.10 keeps it for the whole NODELOCK_EXPIRE (5m)');
    expect(output).to.include('demo finished; stopping');
  });

  it('on real nodes: both variants with kubelet frozen, each replacement Running with the GPU its allocation names; the image a user can run; exits 0 and leaves no node behind', async () => {
    // Run folders of real nodes that other runs on this machine own (a chaos run beside this one).
    const othersBefore = new Set(realNodeProcesses().map((line) => runFolderOf(line)));
    const { code, output } = await runLocal([
      '--nodes',
      'real',
      '--demo',
      'seed',
      '--exit-after-demo',
      '--gpu-nodes',
      '1',
      '--no-view',
    ]);
    expect(code, output).to.equal(0);
    expect(output).to.match(/local: real nodes, as --nodes=real asks/);
    expect(output).to.include('the real nodes hold image vgpu-warden.local/busybox:1');
    expect(output).to.match(/try: kubectl apply -f \S+examples\/real-node-gpu-pod\.yaml/);
    for (const variant of ['force', 'graceful']) {
      const running = new RegExp(
        `seed demo \\(${variant} delete\\): replacement pod seed-replacement-${variant} Running on gpu-node-1 with NVIDIA_VISIBLE_DEVICES=GPU-gpu-node-1-\\d (\\d+) ms after the delete`,
      ).exec(output);
      expect(running, output).to.not.equal(null);
      expect(Number(running?.[1])).to.be.below(30_000);
    }
    expect(output).to.include('demo finished; stopping');
    const left = realNodeProcesses().filter((line) => !othersBefore.has(runFolderOf(line)));
    expect(left, 'no kubelet or containerd of the local nodes left').to.deep.equal([]);
  });

  it('stops on Ctrl-C (SIGINT) with vgpu-warden first, so nothing complains of a vanished apiserver, and exits 130', async () => {
    const local = startLocal(['--nodes', 'simulated', '--gpu-nodes', '1', '--no-view']);
    await local.ready;
    const { code, stopping, output } = await local.interrupt();
    expect(code, output).to.equal(130);
    expect(stopping, 'the newest resource stops first').to.match(
      /received SIGINT; stopping vgpu-warden.*control plane/,
    );
    expect(stopping, stopping).to.not.match(/unreachable|could not write Event|ECONNREFUSED/i);
  });

  it('a failure after the start (--kubeconfig-out into a missing folder) stops what came up and exits 1 with the error, leaving no process behind', async () => {
    const missing = join(tmpdir(), `no-such-folder-${process.pid}`, 'kubeconfig');
    const started = Date.now();
    const { code, output } = await runLocal([
      '--nodes',
      'simulated',
      '--gpu-nodes',
      '1',
      '--no-view',
      '--kubeconfig-out',
      missing,
    ]);
    const tookMs = Date.now() - started;
    expect(code, output).to.equal(1);
    expect(output).to.match(/ENOENT.*no-such-folder/);
    expect(output, 'it never claimed to be ready').to.not.include('ready; use it with');
    const etcdUrl = /etcd ready on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
    expect(etcdUrl, output).to.be.a('string');
    const left = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.includes(`=${etcdUrl ?? ''}`));
    expect(left, 'no etcd or kube-apiserver of that run left').to.deep.equal([]);
    process.stdout.write(`        failed start -> exit: ${tookMs} ms in all\n`);
  });

  it('on real nodes, the example pod the startup lines point to runs with its GPU; Ctrl-C then stops vgpu-warden, the real nodes and the control plane in that order', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'local-real-'));
    const kubeconfigPath = join(dir, 'kubeconfig');
    const local = startLocal(['--nodes', 'real', '--gpu-nodes', '1', '--no-view', '--kubeconfig-out', kubeconfigPath]);
    try {
      await local.ready;
      const example = /try: kubectl apply -f (\S+);/.exec(local.output())?.[1];
      expect(example, local.output()).to.equal(join(repoRoot, 'examples', 'real-node-gpu-pod.yaml'));
      // What `kubectl apply -f` sends for a new object: the manifest, created as it is.
      const core = loadKubeConfig(kubeconfigPath).makeApiClient(CoreV1Api);
      await core.createNamespacedPod({
        namespace: 'default',
        body: loadYaml<V1Pod>(readFileSync(example ?? '', 'utf8')),
      });
      const running = await eventually(
        'gpu-demo Running',
        async () => {
          const pod = await core.readNamespacedPod({ name: 'gpu-demo', namespace: 'default' });
          return pod.status?.phase === 'Running' ? pod : notYet(`phase ${pod.status?.phase ?? 'none'}`);
        },
        60_000,
        200,
      );
      expect(running.spec?.schedulerName, 'the webhook sent it to vgpu-warden').to.equal('hami-scheduler');
      const allocated = running.metadata?.annotations?.['hami.io/vgpu-devices-allocated'] ?? '';
      const log = await eventually(
        'gpu-demo printed its environment',
        async () => {
          const text = await core.readNamespacedPodLog({ name: 'gpu-demo', namespace: 'default' });
          return text.includes('NVIDIA_VISIBLE_DEVICES=') ? text : notYet('no environment yet');
        },
        20_000,
        200,
      );
      // `kubectl logs gpu-demo` shows the GPU, the memory and the core share its allocation names.
      const [uuid = '', , memory = '', cores = ''] = allocated.split(':')[0]?.split(',') ?? [];
      expect(log).to.include(`NVIDIA_VISIBLE_DEVICES=${uuid}\n`);
      expect(log).to.include(`CUDA_DEVICE_MEMORY_LIMIT_0=${memory}m\n`);
      expect(log).to.include(`CUDA_DEVICE_SM_LIMIT=${cores}\n`);
      expect(cores).to.equal('25');
    } finally {
      const { code, stopping, output } = await local.interrupt();
      rmSync(dir, { recursive: true, force: true });
      expect(code, output).to.equal(130);
      expect(stopping, stopping).to.match(
        /received SIGINT; stopping vgpu-warden, device plugins, real nodes, control plane/,
      );
      // "No address added": grpc-js failing to serve again in a node folder being removed (a plugin
      // that outlived its kubelet).
      expect(stopping, stopping).to.not.match(/unreachable|could not write Event|ECONNREFUSED|No address added/i);
    }
  });
});
