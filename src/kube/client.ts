import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';
import { resolveKubeconfig, SERVICE_ACCOUNT_DIR, type KubeconfigSources } from './kubeconfig-resolution.js';
import type { KubeconfigSetting } from '../config/kubeconfig-setting.js';

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

function fileOrData(file: string | undefined, data: string | undefined): string {
  if (data !== undefined && data !== '') return data;
  if (file === undefined || file === '') return '';
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return `unreadable:${file}`;
  }
}

/**
 * client-node 2.x builds a new undici Agent, and so a new TLS connection, for every request
 * (measured here: 13 ms per GET against a local apiserver, 2 ms on a kept-alive connection). This
 * KubeConfig keeps one dispatcher per TLS identity and reuses it, so calls share kept-alive
 * connections. The identity includes the CA and client certificate contents, so rotated files get
 * a fresh dispatcher.
 */
export class PooledKubeConfig extends KubeConfig {
  private pooled: { key: string; dispatcher: Dispatcher } | undefined;
  /**
   * Where loadKubeConfig found it (`KUBECONFIG (env): /a:/b`,
   * `in-cluster service account (...)`), for a start-up log line.
   */
  from: string | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const fresh = context.getDispatcher();
    if (fresh === undefined) return;
    const key = this.tlsIdentity();
    if (this.pooled?.key === key) {
      context.setDispatcher(this.pooled.dispatcher);
      // The fresh agent never opened a connection; closing it just releases the object.
      void fresh.close().catch(() => undefined);
      return;
    }
    const previous = this.pooled;
    this.pooled = { key, dispatcher: fresh };
    // Let requests still in flight on the old identity finish before its connections close.
    if (previous) void previous.dispatcher.close().catch(() => undefined);
  }

  /** Closes the pooled connections (for a clean process exit). */
  async close(): Promise<void> {
    const pooled = this.pooled;
    this.pooled = undefined;
    await pooled?.dispatcher.close();
  }

  private tlsIdentity(): string {
    const cluster = this.getCurrentCluster();
    const user = this.getCurrentUser();
    return createHash('sha256')
      .update(`${cluster?.server ?? ''}\0${String(cluster?.skipTLSVerify)}\0${cluster?.tlsServerName ?? ''}\0`)
      .update(fileOrData(cluster?.caFile, cluster?.caData))
      .update('\0')
      .update(fileOrData(user?.certFile, user?.certData))
      .update('\0')
      .update(fileOrData(user?.keyFile, user?.keyData))
      .digest('hex');
  }
}

/** The real files and environment, for loadKubeConfig; `env` is the CLI's environment. */
export function kubeconfigSources(env: Readonly<Record<string, string | undefined>> = process.env): KubeconfigSources {
  return {
    env,
    homeDir: () => homedir(),
    serviceAccountDir: SERVICE_ACCOUNT_DIR,
    readFile: (path) => readFileSync(path, 'utf8'),
    exists: (path) => existsSync(path),
  };
}

/**
 * Builds the KubeConfig every component gets injected, resolved as kubectl does (see
 * resolveKubeconfig): the setting's files (a plain string is one file that must exist), else
 * ~/.kube/config, else the in-cluster service account; `context` (--context) instead of the file's
 * current-context. Throws KubeconfigError (a ConfigError, one
 * line naming the setting and its source) instead of client-node's errors at the first request.
 */
export function loadKubeConfig(
  kubeconfig: string | KubeconfigSetting | undefined,
  sources: KubeconfigSources = kubeconfigSources(),
  context?: string,
): PooledKubeConfig {
  const setting =
    typeof kubeconfig === 'string' ? { paths: [kubeconfig], origin: 'kubeconfig', explicit: true } : kubeconfig;
  const { from, ...options } = resolveKubeconfig(setting, sources, context);
  const kubeConfig = new PooledKubeConfig();
  kubeConfig.loadFromOptions(options);
  kubeConfig.from = from;
  return kubeConfig;
}
