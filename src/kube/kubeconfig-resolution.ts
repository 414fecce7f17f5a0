import { dirname, join } from 'node:path';
import { isIPv6 } from 'node:net';
import { KubeConfig, loadYaml, type Cluster, type Context, type User } from '@kubernetes/client-node';
import { ConfigError } from '../config/setting-spec.js';
import { clip } from '../base/user-text.js';
import type { KubeconfigSetting } from '../config/kubeconfig-setting.js';

/** What resolution reads; injected so tests use temp files and never the real home or service account. */
export interface KubeconfigSources {
  /** HOME, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT. */
  env: Readonly<Record<string, string | undefined>>;
  /** Home directory when HOME is unset (os.homedir()). */
  homeDir: () => string | undefined;
  /** Where the kubelet mounts the service account: token, ca.crt. */
  serviceAccountDir: string;
  /** Reads a file as UTF-8; throws Node's error (with `code`, e.g. ENOENT) when it cannot. */
  readFile: (path: string) => string;
  exists: (path: string) => boolean;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** A kubeconfig that cannot be used; names the setting, its source and the file. A ConfigError: exit 2. */
export class KubeconfigError extends ConfigError {}

export interface ResolvedKubeconfig {
  clusters: Cluster[];
  users: User[];
  contexts: Context[];
  currentContext: string;
  /** Where it came from, for a start-up log line: `KUBECONFIG (env): /a:/b`, `in-cluster service account`. */
  from: string;
}

/** Longest path a message repeats. */
const PATH_CHARS = 200;

const READ_ERRORS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EISDIR: 'is a directory, not a file',
  ENOTDIR: 'no such file (a parent is not a directory)',
};

function readProblem(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? (READ_ERRORS[code] ?? code) : 'unreadable';
}

interface ParsedFile {
  path: string;
  config: KubeConfig;
}

/** One file, parsed as client-node does, with relative certificate paths taken from its directory. */
function parseFile(origin: string, path: string, text: string): ParsedFile {
  const config = new KubeConfig();
  try {
    // client-node assumes a mapping; an empty file or a bare string would fail inside it with a TypeError.
    if (text.trim() === '')
      throw new KubeconfigError(`${origin}: ${clip(path, PATH_CHARS)} is not a kubeconfig (empty file)`);
    const document = loadYaml<unknown>(text);
    if (typeof document !== 'object' || document === null || Array.isArray(document)) {
      throw new KubeconfigError(`${origin}: ${clip(path, PATH_CHARS)} is not a kubeconfig (not a YAML mapping)`);
    }
    config.loadFromString(text);
  } catch (error) {
    if (error instanceof KubeconfigError) throw error;
    // js-yaml's messages span lines (they quote the source); the first line says what is wrong.
    const reason = (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
    throw new KubeconfigError(
      `${origin}: ${clip(path, PATH_CHARS)} is not a kubeconfig (${clip(reason, PATH_CHARS)})`,
      { cause: error },
    );
  }
  config.makePathsAbsolute(dirname(path));
  return { path, config };
}

function readFiles(setting: KubeconfigSetting, sources: KubeconfigSources): ParsedFile[] {
  const parsed: ParsedFile[] = [];
  const missing: string[] = [];
  for (const path of setting.paths) {
    let text: string;
    try {
      text = sources.readFile(path);
    } catch (error) {
      const problem = readProblem(error);
      // kubectl skips KUBECONFIG entries that do not exist; an unreadable one is still an error.
      if (!setting.explicit && problem === READ_ERRORS.ENOENT) {
        missing.push(path);
        continue;
      }
      throw new KubeconfigError(`${setting.origin}: ${clip(path, PATH_CHARS)}: ${problem}`, { cause: error });
    }
    parsed.push(parseFile(setting.origin, path, text));
  }
  if (parsed.length === 0) {
    const shown = clip(missing.join(', '), PATH_CHARS);
    throw new KubeconfigError(
      `${setting.origin}: ${shown}: ${missing.length > 1 ? 'none of these files exists' : 'no such file'}`,
    );
  }
  return parsed;
}

/** client-go's merge: for each name the first file that defines it wins; so does the first current-context. */
function merge(
  files: readonly ParsedFile[],
): Omit<ResolvedKubeconfig, 'from' | 'currentContext'> & { currentContext: string | undefined } {
  const firstByName = <T extends { name: string }>(lists: T[][]): T[] => {
    const seen = new Map<string, T>();
    for (const item of lists.flat()) if (!seen.has(item.name)) seen.set(item.name, item);
    return [...seen.values()];
  };
  return {
    clusters: firstByName(files.map(({ config }) => config.getClusters())),
    users: firstByName(files.map(({ config }) => config.getUsers())),
    contexts: firstByName(files.map(({ config }) => config.getContexts())),
    currentContext: files
      .map(({ config }) => config.getCurrentContext())
      .find((name) => typeof name === 'string' && name !== ''),
  };
}

function names(items: readonly { name: string }[]): string {
  return clip(items.map((item) => item.name).join(', '), PATH_CHARS);
}

/**
 * The checks client-node leaves to the first request, where they surface as `No active cluster!`
 * or `HTTP protocol is not allowed ...` with no word on which file or setting is at fault.
 */
function usable(merged: ReturnType<typeof merge>, where: string, chosen: string | undefined): ResolvedKubeconfig {
  const { clusters, contexts, users } = merged;
  const currentContext = chosen ?? merged.currentContext;
  if (clusters.length === 0) throw new KubeconfigError(`${where} is not a kubeconfig (no clusters)`);
  if (currentContext === undefined) {
    throw new KubeconfigError(
      `${where}: no current-context (contexts: ${names(contexts) || 'none'}); pick one with kubectl config ` +
        `use-context or --context`,
    );
  }
  const quotedContext = JSON.stringify(clip(currentContext, PATH_CHARS));
  const context = contexts.find((candidate) => candidate.name === currentContext);
  const which = chosen === undefined ? 'current-context' : 'context (flag --context)';
  if (context === undefined)
    throw new KubeconfigError(
      `${where}: ${which} ${quotedContext} is not among its contexts (${names(contexts) || 'none'})`,
    );
  const cluster = clusters.find((candidate) => candidate.name === context.cluster);
  if (cluster === undefined) {
    throw new KubeconfigError(
      `${where}: context ${quotedContext} names cluster ${JSON.stringify(clip(context.cluster, PATH_CHARS))}, which ` +
        `is not defined`,
    );
  }
  // client-node leaves `user` undefined when the context names none, whatever its type says.
  const user = context.user as string | undefined;
  if (user !== undefined && !users.some((candidate) => candidate.name === user)) {
    throw new KubeconfigError(
      `${where}: context ${quotedContext} names user ${JSON.stringify(clip(user, PATH_CHARS))}, which is not defined`,
    );
  }
  if (cluster.server.startsWith('http:') && !cluster.skipTLSVerify) {
    throw new KubeconfigError(
      `${where}: cluster ${JSON.stringify(clip(cluster.name, PATH_CHARS))} has a plain-HTTP server (${clip(cluster.server, PATH_CHARS)}); vgpu-warden talks HTTPS only: use the apiserver's https:// address`,
    );
  }
  return { clusters, contexts, users, currentContext, from: where };
}

function fromFiles(
  setting: KubeconfigSetting,
  sources: KubeconfigSources,
  context: string | undefined,
): ResolvedKubeconfig {
  const files = readFiles(setting, sources);
  const where = `${setting.origin}: ${clip(files.map((file) => file.path).join(':'), PATH_CHARS)}`;
  return usable(merge(files), where, context);
}

/** The in-cluster config as client-go builds it: https to KUBERNETES_SERVICE_HOST:PORT, the mounted token and CA. */
function inCluster(host: string, port: string, dir: string): ResolvedKubeconfig {
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  return {
    clusters: [{ name: 'in-cluster', server, caFile: join(dir, 'ca.crt'), skipTLSVerify: false }],
    // client-node's tokenFile provider re-reads the token, which the kubelet rotates.
    users: [{ name: 'in-cluster', authProvider: { name: 'tokenFile', config: { tokenFile: join(dir, 'token') } } }],
    contexts: [{ name: 'in-cluster', cluster: 'in-cluster', user: 'in-cluster' }],
    currentContext: 'in-cluster',
    from: `in-cluster service account (${server})`,
  };
}

/** os.homedir() throws for a uid without a passwd entry (the image's 10001 when HOME is unset): no home, then. */
function homeDirOf(sources: KubeconfigSources): string | undefined {
  try {
    return sources.homeDir();
  } catch {
    return undefined;
  }
}

/**
 * Finds the kubeconfig the way kubectl does: the setting's files (--kubeconfig, else KUBECONFIG's
 * list); without one, ~/.kube/config; then the in-cluster service account. `context` (--context)
 * picks a context of the files instead of their current-context; the in-cluster configuration has
 * none to pick from, so a context given there is refused rather than ignored. Every failure is one
 * line naming the setting and its source; when nothing is found, the line lists what was tried.
 */
export function resolveKubeconfig(
  setting: KubeconfigSetting | undefined,
  sources: KubeconfigSources,
  context?: string,
): ResolvedKubeconfig {
  if (setting !== undefined) return fromFiles(setting, sources, context);
  const tried = ['KUBECONFIG and --kubeconfig unset'];
  const home = sources.env.HOME !== undefined && sources.env.HOME !== '' ? sources.env.HOME : homeDirOf(sources);
  if (home === undefined || home === '') {
    tried.push('~/.kube/config (no home directory)');
  } else {
    const path = join(home, '.kube', 'config');
    if (sources.exists(path))
      return fromFiles(
        { paths: [path], origin: 'KUBECONFIG (default ~/.kube/config)', explicit: true },
        sources,
        context,
      );
    tried.push(`${clip(path, PATH_CHARS)} (no such file)`);
  }
  const { KUBERNETES_SERVICE_HOST: host, KUBERNETES_SERVICE_PORT: port } = sources.env;
  const token = join(sources.serviceAccountDir, 'token');
  if (host === undefined || host === '' || port === undefined || port === '') {
    tried.push('in-cluster (KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT unset)');
  } else if (!sources.exists(token)) {
    tried.push(`in-cluster (${token} missing: is automountServiceAccountToken off?)`);
  } else if (context !== undefined) {
    throw new KubeconfigError(
      `--context ${JSON.stringify(clip(context, PATH_CHARS))} names a kubeconfig context, but there is no ` +
        `kubeconfig (tried ${tried.join(', ')}) and the in-cluster service account has no contexts; drop --context ` +
        `or pass --kubeconfig`,
    );
  } else {
    return inCluster(host, port, sources.serviceAccountDir);
  }
  throw new KubeconfigError(`no kubeconfig found: tried ${tried.join(', ')}; set KUBECONFIG or pass --kubeconfig`);
}
