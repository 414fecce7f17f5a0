import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { EXIT_OK, EXIT_USAGE, runCli } from '../../src/commands/cli.js';
import { locksCommand } from '../../src/commands/locks-command.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import type { KubeconfigSources } from '../../src/kube/kubeconfig-resolution.js';
import { sharedControlPlane } from '../support/test-cluster.js';

/**
 * The kubeconfig is found as kubectl finds it, and what is found talks to a real kube-apiserver:
 * a KUBECONFIG list split across files (credentials in one, cluster and context in another, a CA
 * file named relative to its kubeconfig), ~/.kube/config from HOME, and the in-cluster service
 * account from a token and CA on disk.
 */
describe('kubeconfig resolution against a real apiserver', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kubeconfig-integration-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function locks(env: Record<string, string>): Promise<{ code: number; out: string[]; err: string[] }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(['locks', '-o', 'json'], [locksCommand()], {
      env,
      stdout: (line) => out.push(line),
      stderr: (line) => err.push(line),
    });
    return { code, out, err };
  }

  function write(path: string, value: unknown): string {
    writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value), { mode: 0o600 });
    return path;
  }

  it('merges a KUBECONFIG list split across files, skipping a missing entry, and lists the locks', async () => {
    const plane = sharedControlPlane();
    mkdirSync(join(dir, 'cluster'));
    write(join(dir, 'cluster', 'ca.crt'), plane.caPem);
    // The first file wins each name: the admin user here shadows a user of the same name with a bad token below.
    const credentials = write(join(dir, 'credentials'), {
      apiVersion: 'v1',
      kind: 'Config',
      users: [{ name: 'admin', user: { token: plane.token } }],
      'current-context': 'local',
    });
    const cluster = write(join(dir, 'cluster', 'config'), {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'local', cluster: { server: plane.server, 'certificate-authority': 'ca.crt' } }],
      users: [{ name: 'admin', user: { token: 'not-the-token' } }],
      contexts: [{ name: 'local', context: { cluster: 'local', user: 'admin' } }],
      'current-context': 'elsewhere',
    });

    const { code, out, err } = await locks({
      KUBECONFIG: `${credentials}:${join(dir, 'missing')}:${cluster}`,
      HOME: dir,
    });

    expect(err).to.deep.equal([]);
    expect(code).to.equal(EXIT_OK);
    expect(JSON.parse(out.join('\n')))
      .to.have.property('items')
      .that.is.an('array');
  });

  it('uses ~/.kube/config from HOME when KUBECONFIG is empty', async () => {
    mkdirSync(join(dir, '.kube'));
    write(join(dir, '.kube', 'config'), readFileSync(sharedControlPlane().kubeconfigPath, 'utf8'));

    const { code, err } = await locks({ KUBECONFIG: '', HOME: dir });

    expect(err).to.deep.equal([]);
    expect(code).to.equal(EXIT_OK);
  });

  it('says which file is wrong instead of failing at the first request', async () => {
    const pod = write(join(dir, 'pod.yaml'), 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n');

    const { code, out, err } = await locks({ KUBECONFIG: pod, HOME: dir });

    expect(code).to.equal(EXIT_USAGE);
    expect(out).to.deep.equal([]);
    expect(err).to.deep.equal([`vgpu-warden: KUBECONFIG (env): ${pod} is not a kubeconfig (no clusters)`]);
  });

  it('uses the in-cluster service account when there is no kubeconfig', async () => {
    const plane = sharedControlPlane();
    const serviceAccount = join(dir, 'serviceaccount');
    mkdirSync(serviceAccount);
    write(join(serviceAccount, 'token'), plane.token);
    write(join(serviceAccount, 'ca.crt'), plane.caPem);
    const { hostname, port } = new URL(plane.server);
    const sources: KubeconfigSources = {
      env: { HOME: dir, KUBERNETES_SERVICE_HOST: hostname, KUBERNETES_SERVICE_PORT: port },
      homeDir: () => undefined,
      serviceAccountDir: serviceAccount,
      readFile: (path) => readFileSync(path, 'utf8'),
      exists: (path) => existsSync(path),
    };

    const kubeConfig = loadKubeConfig(undefined, sources);
    try {
      expect(kubeConfig.from).to.equal(`in-cluster service account (${plane.server})`);
      const namespaces = await kubeConfig.makeApiClient(CoreV1Api).listNamespace();
      expect(namespaces.items.map((namespace) => namespace.metadata?.name)).to.include('default');
    } finally {
      await kubeConfig.close();
    }
  });
});
