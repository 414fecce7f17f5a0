import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ConfigError } from '../../../src/config/setting-spec.js';
import { loadConfig } from '../../../src/config/load.js';
import { loadKubeConfig } from '../../../src/kube/client.js';
import { KubeconfigError, resolveKubeconfig, type KubeconfigSources } from '../../../src/kube/kubeconfig-resolution.js';
import type { KubeconfigSetting } from '../../../src/config/kubeconfig-setting.js';

interface Entry {
  clusters?: { name: string; server: string; ca?: string; insecure?: boolean }[];
  users?: { name: string; token: string }[];
  contexts?: { name: string; cluster: string; user?: string }[];
  current?: string;
}

function kubeconfigYaml(entry: Entry): string {
  const lines = ['apiVersion: v1', 'kind: Config'];
  lines.push(
    'clusters:',
    ...(entry.clusters ?? []).flatMap((c) => [
      `- name: ${c.name}`,
      '  cluster:',
      `    server: ${c.server}`,
      ...(c.ca === undefined ? [] : [`    certificate-authority: ${c.ca}`]),
      ...(c.insecure === true ? ['    insecure-skip-tls-verify: true'] : []),
    ]),
  );
  lines.push(
    'users:',
    ...(entry.users ?? []).flatMap((u) => [`- name: ${u.name}`, '  user:', `    token: ${u.token}`]),
  );
  lines.push(
    'contexts:',
    ...(entry.contexts ?? []).flatMap((c) => [
      `- name: ${c.name}`,
      '  context:',
      `    cluster: ${c.cluster}`,
      ...(c.user === undefined ? [] : [`    user: ${c.user}`]),
    ]),
  );
  if (entry.current !== undefined) lines.push(`current-context: ${entry.current}`);
  return `${lines.join('\n')}\n`;
}

const single = (name: string, server = `https://${name}.example:6443`): Entry => ({
  clusters: [{ name, server }],
  users: [{ name, token: `${name}-token` }],
  contexts: [{ name, cluster: name, user: name }],
  current: name,
});

describe('kubeconfig resolution (as kubectl does it)', () => {
  let root: string;
  let home: string;
  let serviceAccount: string;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'kubeconfig-resolution-'));
    home = join(root, 'home');
    serviceAccount = join(root, 'serviceaccount');
    mkdirSync(home);
    mkdirSync(serviceAccount);
  });

  afterEach(() => {
    rmSync(root, { recursive: true, force: true });
  });

  function sources(env: Record<string, string> = {}): KubeconfigSources {
    return {
      env: { HOME: home, ...env },
      homeDir: () => undefined,
      serviceAccountDir: serviceAccount,
      readFile: (path) => readFileSync(path, 'utf8'),
      exists: (path) => existsSync(path),
    };
  }

  function file(name: string, text: string): string {
    const path = join(root, name);
    writeFileSync(path, text);
    return path;
  }

  const fromEnv = (...paths: string[]): KubeconfigSetting => ({ paths, origin: 'KUBECONFIG (env)', explicit: false });

  function failure(run: () => unknown): Error {
    try {
      run();
    } catch (error) {
      expect(error).to.be.instanceOf(KubeconfigError);
      expect(error).to.be.instanceOf(ConfigError);
      expect((error as Error).message).not.to.include('\n');
      return error as Error;
    }
    throw new Error('expected a KubeconfigError');
  }

  it('merges a KUBECONFIG list as client-go does: the first file to name a cluster, user, context or current-context wins', () => {
    const a = file('a', kubeconfigYaml({ ...single('shared', 'https://from-a:6443'), current: 'shared' }));
    const b = file(
      'b',
      kubeconfigYaml({
        clusters: [
          { name: 'shared', server: 'https://from-b:6443' },
          { name: 'only-b', server: 'https://only-b:6443' },
        ],
        users: [{ name: 'shared', token: 'b-token' }],
        contexts: [{ name: 'only-b', cluster: 'only-b', user: 'shared' }],
        current: 'only-b',
      }),
    );
    const resolved = resolveKubeconfig(fromEnv(a, b), sources());
    expect(resolved.currentContext).to.equal('shared');
    expect(resolved.clusters.map((c) => [c.name, c.server])).to.deep.equal([
      ['shared', 'https://from-a:6443'],
      ['only-b', 'https://only-b:6443'],
    ]);
    expect(resolved.users.find((u) => u.name === 'shared')?.token).to.equal('shared-token');
    expect(resolved.contexts.map((c) => c.name)).to.deep.equal(['shared', 'only-b']);
    expect(resolved.from).to.equal(`KUBECONFIG (env): ${a}:${b}`);
  });

  it('takes current-context from a later file when the first sets none, and users from a file of their own', () => {
    const clusters = file(
      'clusters',
      kubeconfigYaml({
        clusters: [{ name: 'c', server: 'https://c:6443' }],
        contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
      }),
    );
    const users = file('users', kubeconfigYaml({ users: [{ name: 'u', token: 't' }], current: 'ctx' }));
    const resolved = resolveKubeconfig(fromEnv(clusters, users), sources());
    expect(resolved.currentContext).to.equal('ctx');
    expect(resolved.users.map((u) => u.name)).to.deep.equal(['u']);
  });

  it('resolves relative certificate paths against the file that names them', () => {
    mkdirSync(join(root, 'sub'));
    const path = file(
      join('sub', 'config'),
      kubeconfigYaml({ ...single('c'), clusters: [{ name: 'c', server: 'https://c:6443', ca: 'ca.crt' }] }),
    );
    expect(resolveKubeconfig(fromEnv(path), sources()).clusters[0]?.caFile).to.equal(join(root, 'sub', 'ca.crt'));
  });

  it('skips a missing KUBECONFIG entry while another exists, as kubectl does', () => {
    const real = file('real', kubeconfigYaml(single('real')));
    expect(resolveKubeconfig(fromEnv(join(root, 'gone'), real), sources()).currentContext).to.equal('real');
  });

  it('names the setting, its source and the file when KUBECONFIG names only missing files', () => {
    expect(failure(() => resolveKubeconfig(fromEnv('/x/y'), sources())).message).to.equal(
      'KUBECONFIG (env): /x/y: no such file',
    );
    expect(failure(() => resolveKubeconfig(fromEnv('/x/y', '/x/z'), sources())).message).to.equal(
      'KUBECONFIG (env): /x/y, /x/z: none of these files exists',
    );
  });

  it('requires the one file of --kubeconfig to exist', () => {
    const setting: KubeconfigSetting = { paths: ['/x/y'], origin: 'KUBECONFIG (flag --kubeconfig)', explicit: true };
    expect(failure(() => resolveKubeconfig(setting, sources())).message).to.equal(
      'KUBECONFIG (flag --kubeconfig): /x/y: no such file',
    );
  });

  it('says a directory or an unreadable file is one, even in a list', () => {
    const real = file('real', kubeconfigYaml(single('real')));
    expect(failure(() => resolveKubeconfig(fromEnv(root, real), sources())).message).to.equal(
      `KUBECONFIG (env): ${root}: is a directory, not a file`,
    );
    if (process.getuid?.() !== 0) {
      const locked = file('locked', kubeconfigYaml(single('locked')));
      chmodSync(locked, 0o000);
      expect(failure(() => resolveKubeconfig(fromEnv(locked), sources())).message).to.equal(
        `KUBECONFIG (env): ${locked}: permission denied`,
      );
    }
  });

  it('says a file that is not a kubeconfig is not one, whatever it holds', () => {
    const cases: [string, string, string][] = [
      ['manifest', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n', 'no clusters'],
      ['empty', '\n', 'empty file'],
      ['words', 'just some words\n', 'not a YAML mapping'],
      ['list', '- a\n- b\n', 'not a YAML mapping'],
    ];
    for (const [name, text, reason] of cases) {
      const path = file(name, text);
      expect(failure(() => resolveKubeconfig(fromEnv(path), sources())).message, name).to.equal(
        `KUBECONFIG (env): ${path} is not a kubeconfig (${reason})`,
      );
    }
    const broken = file('broken', 'clusters: [\n  - {name: a\n');
    expect(failure(() => resolveKubeconfig(fromEnv(broken), sources())).message).to.match(
      new RegExp(`^KUBECONFIG \\(env\\): ${broken} is not a kubeconfig \\(.+\\)$`),
    );
    const serverless = file('serverless', 'clusters:\n- name: a\n  cluster: {}\n');
    expect(failure(() => resolveKubeconfig(fromEnv(serverless), sources())).message).to.equal(
      `KUBECONFIG (env): ${serverless} is not a kubeconfig (clusters[0].cluster.server is missing)`,
    );
  });

  it('finds what client-node would only fail on at the first request', () => {
    const noCurrent = file('no-current', kubeconfigYaml({ ...single('a'), current: undefined }));
    expect(failure(() => resolveKubeconfig(fromEnv(noCurrent), sources())).message).to.equal(
      `KUBECONFIG (env): ${noCurrent}: no current-context (contexts: a); pick one with kubectl config use-context or --context`,
    );
    const unknown = file('unknown', kubeconfigYaml({ ...single('a'), current: 'b' }));
    expect(failure(() => resolveKubeconfig(fromEnv(unknown), sources())).message).to.equal(
      `KUBECONFIG (env): ${unknown}: current-context "b" is not among its contexts (a)`,
    );
    const noCluster = file(
      'no-cluster',
      kubeconfigYaml({ ...single('a'), contexts: [{ name: 'a', cluster: 'z', user: 'a' }] }),
    );
    expect(failure(() => resolveKubeconfig(fromEnv(noCluster), sources())).message).to.equal(
      `KUBECONFIG (env): ${noCluster}: context "a" names cluster "z", which is not defined`,
    );
    const noUser = file(
      'no-user',
      kubeconfigYaml({ ...single('a'), contexts: [{ name: 'a', cluster: 'a', user: 'z' }] }),
    );
    expect(failure(() => resolveKubeconfig(fromEnv(noUser), sources())).message).to.equal(
      `KUBECONFIG (env): ${noUser}: context "a" names user "z", which is not defined`,
    );
    const http = file('http', kubeconfigYaml(single('a', 'http://127.0.0.1:8080')));
    expect(failure(() => resolveKubeconfig(fromEnv(http), sources())).message).to.equal(
      `KUBECONFIG (env): ${http}: cluster "a" has a plain-HTTP server (http://127.0.0.1:8080); vgpu-warden talks HTTPS only: use the apiserver's https:// address`,
    );
  });

  it('accepts a context without a user, and a plain-HTTP server the kubeconfig marks insecure', () => {
    const anonymous = file(
      'anonymous',
      kubeconfigYaml({
        clusters: [{ name: 'a', server: 'https://a:6443' }],
        contexts: [{ name: 'a', cluster: 'a' }],
        current: 'a',
      }),
    );
    expect(resolveKubeconfig(fromEnv(anonymous), sources()).currentContext).to.equal('a');
    const insecure = file(
      'insecure',
      kubeconfigYaml({ ...single('a'), clusters: [{ name: 'a', server: 'http://127.0.0.1:8001', insecure: true }] }),
    );
    expect(resolveKubeconfig(fromEnv(insecure), sources()).clusters[0]?.server).to.equal('http://127.0.0.1:8001');
  });

  it('without a setting uses ~/.kube/config from HOME, naming it as the default in errors', () => {
    mkdirSync(join(home, '.kube'));
    writeFileSync(join(home, '.kube', 'config'), kubeconfigYaml(single('home')));
    const resolved = resolveKubeconfig(
      undefined,
      sources({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }),
    );
    expect(resolved.currentContext).to.equal('home');
    expect(resolved.from).to.equal(`KUBECONFIG (default ~/.kube/config): ${join(home, '.kube', 'config')}`);
    writeFileSync(join(home, '.kube', 'config'), 'kind: Pod\n');
    expect(failure(() => resolveKubeconfig(undefined, sources())).message).to.equal(
      `KUBECONFIG (default ~/.kube/config): ${join(home, '.kube', 'config')} is not a kubeconfig (no clusters)`,
    );
  });

  it('falls back to the home directory the platform reports when HOME is unset', () => {
    mkdirSync(join(root, 'other', '.kube'), { recursive: true });
    writeFileSync(join(root, 'other', '.kube', 'config'), kubeconfigYaml(single('other')));
    const resolved = resolveKubeconfig(undefined, { ...sources(), env: {}, homeDir: () => join(root, 'other') });
    expect(resolved.currentContext).to.equal('other');
  });

  it('then uses the in-cluster service account, as client-go builds it', () => {
    writeFileSync(join(serviceAccount, 'token'), 'sa-token');
    const resolved = resolveKubeconfig(
      undefined,
      sources({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }),
    );
    expect(resolved.clusters).to.deep.equal([
      {
        name: 'in-cluster',
        server: 'https://[fd00::1]:443',
        caFile: join(serviceAccount, 'ca.crt'),
        skipTLSVerify: false,
      },
    ]);
    expect(resolved.users[0]?.authProvider).to.deep.equal({
      name: 'tokenFile',
      config: { tokenFile: join(serviceAccount, 'token') },
    });
    expect(resolved.from).to.equal('in-cluster service account (https://[fd00::1]:443)');
  });

  it('lists what it tried, on one line, when it finds nothing', () => {
    expect(failure(() => resolveKubeconfig(undefined, sources())).message).to.equal(
      `no kubeconfig found: tried KUBECONFIG and --kubeconfig unset, ${join(home, '.kube', 'config')} (no such file), in-cluster (KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT unset); set KUBECONFIG or pass --kubeconfig`,
    );
    expect(
      failure(() =>
        resolveKubeconfig(undefined, sources({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' })),
      ).message,
    ).to.include(`in-cluster (${join(serviceAccount, 'token')} missing: is automountServiceAccountToken off?)`);
    expect(failure(() => resolveKubeconfig(undefined, { ...sources(), env: {} })).message).to.include(
      '~/.kube/config (no home directory)',
    );
    // os.homedir() throws for a uid with no passwd entry (the image's 10001 without HOME).
    const noPasswd = {
      ...sources(),
      env: {},
      homeDir: () => {
        throw new Error('ENOENT: no such file or directory, uv_os_get_passwd');
      },
    };
    expect(failure(() => resolveKubeconfig(undefined, noPasswd)).message).to.include(
      '~/.kube/config (no home directory)',
    );
  });

  it('treats an empty KUBECONFIG as unset, from the environment to the resolution', () => {
    mkdirSync(join(home, '.kube'));
    writeFileSync(join(home, '.kube', 'config'), kubeconfigYaml(single('home')));
    const setting = loadConfig({ KUBECONFIG: '' }, {}, ['kubeconfig']).kubeconfig;
    expect(resolveKubeconfig(setting, sources()).currentContext).to.equal('home');
  });

  it('builds a working client from a list, never client-node\'s "No active cluster!"', async () => {
    const a = file('a', kubeconfigYaml({ users: [{ name: 'u', token: 'list-token' }] }));
    const b = file(
      'b',
      kubeconfigYaml({
        clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
        contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
        current: 'ctx',
      }),
    );
    const setting = loadConfig({ KUBECONFIG: `${a}:${b}` }, {}, ['kubeconfig']).kubeconfig;
    const kubeConfig = loadKubeConfig(setting, sources());
    expect(kubeConfig.getCurrentCluster()?.server).to.equal('https://127.0.0.1:1');
    expect(kubeConfig.from).to.equal(`KUBECONFIG (env): ${a}:${b}`);
    expect(() => kubeConfig.makeApiClient(CoreV1Api)).not.to.throw();
    await kubeConfig.close();
  });

  it('--context picks a context of the files instead of their current-context, and names the flag when it is not there', () => {
    const both = file(
      'both',
      kubeconfigYaml({
        clusters: [
          { name: 'good', server: 'https://good:6443' },
          { name: 'broken', server: 'https://127.0.0.1:1' },
        ],
        users: [{ name: 'u', token: 't' }],
        contexts: [
          { name: 'good', cluster: 'good', user: 'u' },
          { name: 'broken', cluster: 'broken', user: 'u' },
        ],
        current: 'broken',
      }),
    );
    expect(resolveKubeconfig(fromEnv(both), sources()).currentContext).to.equal('broken');
    const picked = resolveKubeconfig(fromEnv(both), sources(), 'good');
    expect(picked.currentContext).to.equal('good');
    const kubeConfig = loadKubeConfig(fromEnv(both), sources(), 'good');
    expect(kubeConfig.getCurrentCluster()?.server).to.equal('https://good:6443');
    expect(failure(() => resolveKubeconfig(fromEnv(both), sources(), 'prod')).message).to.equal(
      `KUBECONFIG (env): ${both}: context (flag --context) "prod" is not among its contexts (good, broken)`,
    );
    // A file with no current-context at all is usable with --context.
    const noCurrent = file('no-current', kubeconfigYaml({ ...single('a'), current: undefined }));
    expect(resolveKubeconfig(fromEnv(noCurrent), sources(), 'a').currentContext).to.equal('a');
    // ~/.kube/config too.
    mkdirSync(join(home, '.kube'));
    writeFileSync(join(home, '.kube', 'config'), readFileSync(both, 'utf8'));
    expect(resolveKubeconfig(undefined, sources(), 'good').currentContext).to.equal('good');
  });

  it('refuses --context where only the in-cluster service account is found, instead of ignoring it', () => {
    writeFileSync(join(serviceAccount, 'token'), 'sa-token');
    const inCluster = sources({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' });
    expect(resolveKubeconfig(undefined, inCluster).currentContext).to.equal('in-cluster');
    expect(failure(() => resolveKubeconfig(undefined, inCluster, 'prod')).message).to.equal(
      `--context "prod" names a kubeconfig context, but there is no kubeconfig (tried KUBECONFIG and --kubeconfig unset, ${join(home, '.kube', 'config')} (no such file)) and the in-cluster service account has no contexts; drop --context or pass --kubeconfig`,
    );
  });

  it('reads a plain string as one file that must exist (the form tests and `local` use)', () => {
    expect(failure(() => loadKubeConfig(join(root, 'missing'), sources())).message).to.equal(
      `kubeconfig: ${join(root, 'missing')}: no such file`,
    );
  });
});
