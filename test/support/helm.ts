import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { kubernetesVersionOf, locateBinaries } from '../../src/local/k8s-binaries.js';

const run = promisify(execFile);

export const REPO_ROOT = resolve(import.meta.dirname, '..', '..');
export const CHART_DIR = resolve(REPO_ROOT, 'charts', 'vgpu-warden');
let renderVersion: string | undefined;
/** The Kubernetes version `helm template` renders for: the test control plane's binaries' own. */
export function renderKubeVersion(): string {
  renderVersion ??= kubernetesVersionOf(locateBinaries({ repoRoot: REPO_ROOT, env: process.env }));
  return renderVersion;
}

export type AnyObject = KubernetesObject & Record<string, unknown>;

let helmPath: Promise<string> | undefined;

/**
 * The pinned helm CLI: VGPU_WARDEN_HELM when set, otherwise the one tools/helm/build.sh builds from
 * Go modules (a cache hit after the first build). Called from a `before` hook with a long timeout:
 * the first build on a fresh machine compiles helm (minutes).
 */
export function helmBinary(): Promise<string> {
  helmPath ??= (async () => {
    const override = process.env.VGPU_WARDEN_HELM;
    if (override !== undefined && override !== '') return override;
    const script = join(REPO_ROOT, 'tools', 'helm', 'build.sh');
    try {
      await run('bash', [script], { maxBuffer: 1 << 20 });
    } catch (error) {
      const output = error as { stdout?: string; stderr?: string };
      throw new Error(`tools/helm/build.sh failed:\n${output.stdout ?? ''}${output.stderr ?? ''}`, { cause: error });
    }
    return (await run('bash', [script, '--print-path'])).stdout.trim();
  })();
  return helmPath;
}

/** helm's own state (repositories, cache) kept out of the user's home. */
const helmHome = mkdtempSync(join(tmpdir(), 'vgpu-warden-helm-home-'));

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs helm; resolves with its exit code and output (a failing helm is a result, not a throw). */
export async function helm(args: string[], kubeconfig?: string): Promise<HelmResult> {
  const binary = await helmBinary();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: helmHome,
    HELM_CACHE_HOME: join(helmHome, 'cache'),
    HELM_CONFIG_HOME: join(helmHome, 'config'),
    HELM_DATA_HOME: join(helmHome, 'data'),
    ...(kubeconfig === undefined ? {} : { KUBECONFIG: kubeconfig }),
  };
  try {
    const { stdout, stderr } = await run(binary, args, { env, maxBuffer: 16 << 20 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: unknown; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === 'number' ? failed.code : -1,
      stdout: failed.stdout ?? '',
      stderr: failed.stderr ?? '',
    };
  }
}

/** Like helm(), but a non-zero exit throws with helm's stderr. */
export async function helmOk(args: string[], kubeconfig?: string): Promise<string> {
  const result = await helm(args, kubeconfig);
  if (result.code !== 0) throw new Error(`helm ${args.join(' ')} exited with ${result.code}: ${result.stderr.trim()}`);
  return result.stdout;
}

export interface RenderOptions {
  namespace: string;
  release?: string;
  valuesFiles?: string[];
  /** --set key=value pairs. */
  set?: Record<string, string>;
  chart?: string;
}

function templateArgs(options: RenderOptions): string[] {
  return [
    'template',
    options.release ?? 'vgpu-warden',
    options.chart ?? CHART_DIR,
    '--namespace',
    options.namespace,
    '--kube-version',
    renderKubeVersion(),
    ...(options.valuesFiles ?? []).flatMap((file) => ['--values', file]),
    ...Object.entries(options.set ?? {}).flatMap(([key, value]) => ['--set', `${key}=${value}`]),
  ];
}

/** `helm template` of the chart: its objects, in the order helm prints them. */
export async function renderChart(options: RenderOptions): Promise<AnyObject[]> {
  const output = await helmOk(templateArgs(options));
  return (loadAllYaml(output) as unknown[]).filter(
    (document): document is AnyObject => typeof document === 'object' && document !== null,
  );
}

/** `helm template` expected to fail: its error output. */
export async function renderChartError(options: RenderOptions): Promise<string> {
  const result = await helm(templateArgs(options));
  if (result.code === 0) throw new Error('helm template succeeded where it should have failed');
  return result.stderr;
}

/** kind/namespace/name of an object. */
export function objectKey(object: KubernetesObject): string {
  return `${object.kind ?? ''}/${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;
}

interface PodTemplateOwner {
  spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
}

/**
 * Objects as compared between the chart and the kustomize base, keyed by kind/namespace/name:
 * - a ConfigMap's config.yaml is compared as the YAML it holds (the chart words its comments
 *   differently);
 * - the chart's checksum/* pod-template annotations (which restart kube-scheduler on a new
 *   configuration under `helm upgrade`) are dropped, since the base has no equivalent.
 * Nothing else is changed: every other field must be equal.
 */
export function comparable(objects: readonly KubernetesObject[]): Map<string, unknown> {
  const result = new Map<string, unknown>();
  for (const original of objects) {
    const object = structuredClone(original) as AnyObject;
    if (object.kind === 'ConfigMap') {
      const data = (object as { data?: Record<string, string> }).data ?? {};
      if (data['config.yaml'] !== undefined)
        (object as { data: Record<string, unknown> }).data['config.yaml'] = loadAllYaml(data['config.yaml']);
    }
    const template = (object as PodTemplateOwner).spec?.template?.metadata;
    if (object.kind === 'Deployment' && template?.annotations !== undefined) {
      const kept = Object.entries(template.annotations).filter(([key]) => !key.startsWith('checksum/'));
      if (kept.length === 0) delete template.annotations;
      else template.annotations = Object.fromEntries(kept);
    }
    const key = objectKey(object);
    if (result.has(key)) throw new Error(`duplicate object ${key}`);
    result.set(key, object);
  }
  return result;
}
