import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import type { JsonPatchOp } from '../../src/admission/json-patch.js';
import { findFreePorts } from '../../src/local/free-port.js';
import { applyJsonPatch } from '../support/apply-json-patch.js';
import { finished, spawnCaptured } from '../support/captured-process.js';
import {
  BuildahContainer,
  buildahAvailable,
  groupProcesses,
  imageConfig,
  signalGroup,
  type ImageConfig,
} from '../support/buildah-container.js';
import { eventually, notYet, testCluster, wakeOn } from '../support/test-cluster.js';
import { outputTail } from '../support/observations.js';
import { createGpuNode, setLock } from '../support/lock-helpers.js';
import { applyShippedIdentities } from '../support/shipped-identities.js';
import { formatLockValue } from '../../src/lock/lock-value.js';

const repoRoot = resolve(import.meta.dirname, '..', '..');
// A tag of its own, so the test never moves the operator's vgpu-warden:<version>; the build script
// reuses an image of the same sources and base, so a rerun with nothing changed takes seconds.
const IMAGE = 'localhost/vgpu-warden:e2e';
const DEFAULT_CERT_DIR = '/tmp/vgpu-warden/webhook-certs';
const NON_ROOT = '10001:10001';
const SERVICE_ACCOUNT_MOUNT = '/run/secrets/kubernetes.io/serviceaccount';

/** `npm run image` with the test's tag; the last lines of its output on failure. */
async function buildImage(): Promise<string> {
  const { code, output } = await finished(
    spawnCaptured('bash', [join(repoRoot, 'tools', 'image', 'build.sh'), '--tag', IMAGE], { cwd: repoRoot }),
  );
  if (code !== 0) throw new Error(`tools/image/build.sh exited ${code}:\n${output.split('\n').slice(-30).join('\n')}`);
  return output;
}

function postReview(port: number, caPem: string, review: unknown): Promise<{ status: number; body: string }> {
  const payload = Buffer.from(JSON.stringify(review));
  return new Promise((done, fail) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate',
        method: 'POST',
        ca: caPem,
        headers: { 'content-type': 'application/json', 'content-length': payload.length },
      },
      (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        res.on('end', () => {
          done({ status: res.statusCode ?? 0, body });
        });
      },
    );
    req.on('error', fail);
    req.end(payload);
  });
}

function envOf(config: ImageConfig): Record<string, string> {
  return Object.fromEntries(
    (config.Env ?? []).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );
}

/** How many lines the output has and its last one, shortened: what a wait on a log saw. */
const HOST_LOCAL_CA_DIR = '/usr/local/share/ca-certificates';

/** The host's own extra CAs (e.g. a proxy's), by file name and base64 body: the image must carry none. */
function hostLocalCas(): { name: string; body: string }[] {
  try {
    return readdirSync(HOST_LOCAL_CA_DIR, { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.crt'))
      .map((name) => ({
        name,
        body: readFileSync(join(HOST_LOCAL_CA_DIR, name), 'utf8').replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, ''),
      }))
      .filter(({ body }) => body.length > 0);
  } catch {
    return [];
  }
}

describe('the container image, built with buildah and run from inside (tools/image/build.sh)', function () {
  this.timeout(120_000);
  let config: ImageConfig;

  before(async function () {
    if (!buildahAvailable()) {
      process.stderr.write(
        '    image tests skipped: buildah is not installed (Debian: apt-get install buildah debootstrap; npm test installs them as root, through npm run setup)\n',
      );
      this.skip();
    }
    // Cold: a Debian root by debootstrap, npm ci of a staging copy, the commit (see docs/install.md).
    this.timeout(20 * 60_000);
    const started = Date.now();
    const output = await buildImage();
    process.stderr.write(
      `    image: ${output.trim().split('\n').at(-1) ?? ''} (test saw ${Math.round((Date.now() - started) / 1000)}s)\n`,
    );
    config = await imageConfig(IMAGE);
  });

  it('runs dist/bin.js serve as uid 10001, keeps certificates under /tmp by default and carries no host CA', async () => {
    expect(config.Entrypoint).to.deep.equal(['node', 'dist/bin.js']);
    expect(config.Cmd).to.deep.equal(['serve']);
    expect(config.User).to.equal(NON_ROOT);
    expect(config.WorkingDir).to.equal('/app');
    expect(Object.keys(config.ExposedPorts ?? {}).sort()).to.deep.equal(['9395/tcp', '9443/tcp', '9444/tcp']);
    const env = envOf(config);
    expect(env.CERT_DIR).to.equal(DEFAULT_CERT_DIR);
    expect(env.NODE_ENV).to.equal('production');
    expect(Object.keys(env)).to.not.include.members(['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'npm_config_cafile']);

    const container = await BuildahContainer.from(IMAGE);
    try {
      const bundle = (await container.readFile('/etc/ssl/certs/ca-certificates.crt')) ?? '';
      const flat = bundle.replace(/\s/g, '');
      for (const ca of hostLocalCas()) {
        expect(flat.includes(ca.body), `${ca.name}, a CA of this machine, is in the image's bundle`).to.equal(false);
        expect(
          await container.readFile(join(HOST_LOCAL_CA_DIR, ca.name)),
          `${ca.name}, a CA of this machine, is in the image`,
        ).to.equal(undefined);
      }
      // Only the production dependencies: the pinned node binary and the compiler stay out.
      expect(await container.readFile('/app/node_modules/typescript/package.json')).to.equal(undefined);
      expect(await container.readFile('/app/node_modules/node/package.json')).to.equal(undefined);
      expect(await container.readFile('/app/dist/bin.js')).to.include("import('./main.js')");
    } finally {
      await container.remove();
    }
  });

  it('answers --help through its entry point as a non-root uid, on Node 24', async () => {
    const container = await BuildahContainer.from(IMAGE);
    try {
      // No --user: the image's USER applies, as under a container runtime.
      const who = await container.run(['node', '-p', '`${process.getuid()}:${process.getgid()} ${process.version}`']);
      expect(who.code, who.stderr).to.equal(0);
      expect(who.stdout.trim()).to.match(/^10001:10001 v24\./);

      const help = await container.run([...(config.Entrypoint ?? []), '--help']);
      expect(help.code, help.stderr).to.equal(0);
      expect(help.stderr).to.equal('');
      expect(help.stdout)
        .to.match(/^Usage: vgpu-warden <command>/)
        .and.include('serve ');
    } finally {
      await container.remove();
    }
  });

  it('has vgpu-warden on its PATH: --version, locks --help, and locks with the in-cluster service account as kubectl exec runs it', async () => {
    const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    const { core, kubeConfig, namespace, controlPlane } = testCluster();
    const container = await BuildahContainer.from(IMAGE);
    const scratch = mkdtempSync(join(tmpdir(), 'image-cli-'));
    let removeIdentities: (() => Promise<void>) | undefined;
    try {
      // As `kubectl exec deploy/vgpu-warden -- vgpu-warden ...` runs it: the image's USER and PATH.
      const shown = await container.run(['vgpu-warden', '--version']);
      expect(shown.code, shown.stderr).to.equal(0);
      expect(shown.stdout).to.equal(`${version}\n`);
      const help = await container.run(['vgpu-warden', 'locks', '--help']);
      expect(help.code, help.stderr).to.equal(0);
      expect(help.stdout)
        .to.match(/^Usage: vgpu-warden locks \[flags\]/)
        .and.match(/--context <value>/)
        .and.match(/--kubeconfig <value>/);

      // The pod's view of the cluster: the Deployment's ServiceAccount (the shipped RBAC) mounted
      // where the kubelet mounts it, KUBERNETES_SERVICE_HOST/PORT set, no kubeconfig anywhere.
      // /var/run is a symlink to /run in the image, which buildah's chroot mounts do not follow:
      // the same directory by its real path (the CLI reads /var/run/secrets/..., through the link).
      removeIdentities = await applyShippedIdentities(kubeConfig, namespace);
      const token =
        (
          await core.createNamespacedServiceAccountToken({
            name: 'vgpu-warden',
            namespace,
            body: { spec: { audiences: [], expirationSeconds: 3600 } },
          })
        ).status?.token ?? '';
      expect(token).to.not.equal('');
      const account = join(scratch, 'serviceaccount');
      mkdirSync(account, { mode: 0o755 });
      writeFileSync(join(account, 'token'), token, { mode: 0o644 });
      writeFileSync(join(account, 'ca.crt'), controlPlane.caPem, { mode: 0o644 });
      const node = await createGpuNode(core);
      await setLock(core, node, formatLockValue(new Date(), { namespace, name: 'gone' }));
      const apiserver = new URL(controlPlane.server);
      const locks = await container.run(['vgpu-warden', 'locks'], {
        mounts: [{ source: account, target: SERVICE_ACCOUNT_MOUNT }],
        env: { KUBERNETES_SERVICE_HOST: apiserver.hostname, KUBERNETES_SERVICE_PORT: apiserver.port },
      });
      expect(locks.code, locks.stderr).to.equal(0);
      expect(locks.stderr).to.equal('');
      const [, holder, age, ...judged] =
        locks.stdout
          .split('\n')
          .find((line) => line.startsWith(`${node} `))
          ?.split(/ +/) ?? [];
      expect(holder, locks.stdout).to.equal(`${namespace}/gone`);
      expect(age).to.match(/^\d+s$/);
      expect(judged).to.deep.equal(['releasable', 'owner-not-found']);
      // explain, the other first troubleshooting step, with the same account.
      await core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name: 'waiting' },
          spec: {
            schedulerName: 'hami-scheduler',
            containers: [{ name: 'c', image: 'cuda', resources: { limits: { 'nvidia.com/gpu': '1' } } }],
          },
        },
      });
      const explained = await container.run(['vgpu-warden', 'explain', `${namespace}/waiting`, '-o', 'json'], {
        mounts: [{ source: account, target: SERVICE_ACCOUNT_MOUNT }],
        env: { KUBERNETES_SERVICE_HOST: apiserver.hostname, KUBERNETES_SERVICE_PORT: apiserver.port },
      });
      expect(explained.code, explained.stderr).to.equal(0);
      expect(explained.stdout).to.include('"waiting"');
    } finally {
      await removeIdentities?.();
      await container.remove();
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it('serves an AdmissionReview from inside the image against the test control plane, certificates in its default directory', async () => {
    const { controlPlane, namespace } = testCluster();
    const container = await BuildahContainer.from(IMAGE);
    // The kubeconfig (0600, root's) copied for uid 10001 to read through a read-only bind mount.
    const scratch = mkdtempSync(join(tmpdir(), 'image-test-'));
    const kubeconfig = join(scratch, 'kubeconfig');
    copyFileSync(controlPlane.kubeconfigPath, kubeconfig);
    chmodSync(kubeconfig, 0o644);
    const [port = 0, extenderPort = 0, metricsPort = 0] = await findFreePorts(3);
    const child = container.start([...(config.Entrypoint ?? []), ...(config.Cmd ?? [])], {
      mounts: [{ source: kubeconfig, target: '/etc/vgpu-warden-test/kubeconfig' }],
      // Only what this host needs: where the apiserver is, loopback ports free here (the container
      // shares the host's network), the test's namespace for the Lease. No CERT_DIR.
      env: {
        KUBECONFIG: '/etc/vgpu-warden-test/kubeconfig',
        POD_NAMESPACE: namespace,
        CERT_HOSTS: '127.0.0.1',
        WEBHOOK_HOST: '127.0.0.1',
        WEBHOOK_PORT: String(port),
        METRICS_HOST: '127.0.0.1',
        EXTENDER_PORT: String(extenderPort),
        METRICS_PORT: String(metricsPort),
      },
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((done) => {
      child.once('close', (code) => {
        done(code);
      });
    });
    try {
      // serve logs (on stdout) as it starts up: each line is a moment to look again; the polls stay as the fallback.
      const caPem = await eventually(
        'serve to write its CA into the default directory',
        async () => {
          const ca = await container.readFile(`${DEFAULT_CERT_DIR}/ca.crt`);
          return ca ?? notYet(`no ${DEFAULT_CERT_DIR}/ca.crt in the container; ${outputTail(output)}`);
        },
        60_000,
        250,
        wakeOn(child.stdout, 'data'),
      ).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}; output:\n${output}`);
      });
      await eventually(
        'the webhook to listen',
        () =>
          Promise.resolve(
            output.includes('admission webhook listening')
              ? true
              : notYet(`no "admission webhook listening" in ${outputTail(output)}`),
          ),
        30_000,
        100,
        wakeOn(child.stdout, 'data'),
      );
      expect(output).to.include(`(directory ${DEFAULT_CERT_DIR})`);

      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'gpu', namespace },
        spec: { containers: [{ name: 'c', image: 'cuda', resources: { limits: { 'nvidia.com/gpu': '1' } } }] },
      };
      const answer = await postReview(port, caPem, {
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: 'image-test-1',
          kind: { group: '', version: 'v1', kind: 'Pod' },
          resource: { group: '', version: 'v1', resource: 'pods' },
          namespace,
          name: 'gpu',
          operation: 'CREATE',
          userInfo: { username: 'image-test' },
          object: pod,
        },
      });
      expect(answer.status, answer.body).to.equal(200);
      const review = JSON.parse(answer.body) as {
        response: { uid: string; allowed: boolean; patchType?: string; patch?: string };
      };
      expect(review.response).to.include({ uid: 'image-test-1', allowed: true, patchType: 'JSONPatch' });
      const mutated = applyJsonPatch(
        pod as unknown,
        JSON.parse(Buffer.from(review.response.patch ?? '', 'base64').toString()) as JsonPatchOp[],
      ) as {
        spec: { schedulerName?: string; containers: { resources: { limits: Record<string, string> } }[] };
      };
      expect(mutated.spec.schedulerName).to.equal('hami-scheduler');
      expect(mutated.spec.containers[0]?.resources.limits['nvidia.com/gpucores']).to.equal('100');

      // A container runtime's stop: SIGTERM to the entry point's process (node, exec form), a clean exit.
      const entry = groupProcesses(child, config.Entrypoint ?? []);
      expect(entry, "the container's node process").to.have.lengthOf(1);
      process.kill(entry[0] ?? 0, 'SIGTERM');
      expect(await exited, output).to.equal(0);
      expect(output).to.include('"signal":"SIGTERM"');
    } finally {
      signalGroup(child, 'SIGKILL');
      await exited;
      await container.remove();
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
