import { podMutationConfig } from '../admission/mutation-config.js';
import { CoreV1Api, type CoreV1Event, type V1Node, type V1Pod, type V1ResourceQuota } from '@kubernetes/client-node';
import {
  configFlag,
  contextFlag,
  contextOf,
  EXIT_FAILURE,
  EXIT_OK,
  UsageError,
  type Command,
  type CommandContext,
} from './cli.js';
import type { Config } from '../config/setting-spec.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../devices/requests.js';
import { describeError, WardenError } from '../base/errors.js';
import { explainPod, lockNodesToInspect, placementFor, type ExplainSettings } from '../explain/explain-pod.js';
import { explanationJson, explanationText } from '../explain/render.js';
import { snapshotCache } from '../explain/snapshot-cache.js';
import { kubeconfigSources, loadKubeConfig } from '../kube/client.js';
import { httpStatusOf, isNotFound } from '../kube/errors.js';
import { KubeNodeLockApi } from '../lock/kube-node-lock-api.js';
import { isDnsLabel, isDnsSubdomain } from '../base/k8s-names.js';
import { NodeNotFoundError } from '../lock/lock-errors.js';
import { parseLockValue, type PodRef } from '../lock/lock-value.js';
import { NodeLocks } from '../lock/node-locks.js';
import { quoted } from '../base/user-text.js';
import { failedLockRow, lockRowOf, type LockRow } from '../lock/lock-report.js';
import { NODE_LOCK_ANNOTATION } from '../hami/wire.js';

/** The cluster could not be read; the cause says why (connection, credentials, RBAC). */
export class ExplainReadError extends WardenError {}

const OUTPUTS = ['text', 'json'] as const;
type Output = (typeof OUTPUTS)[number];

/** Objects per list page: large clusters are read in pages instead of one huge response. */
const PAGE_SIZE = 500;
/** A pod with more events than this (pages × PAGE_SIZE) is shown with its first ones read. */
const EVENT_PAGES = 10;

const ARGUMENT = '<namespace>/<pod>';

function outputOf(value: string | boolean | string[] | undefined): Output {
  if (value === undefined) return 'text';
  const found = OUTPUTS.find((output) => output === value);
  if (found === undefined)
    throw new UsageError(`unknown output format ${quoted(value)} for "explain"; expected one of ${OUTPUTS.join(', ')}`);
  return found;
}

/** `team-a/train-0` → the pod; anything else is a usage error that quotes (clipped) what was given. */
export function parsePodArgument(args: readonly string[]): PodRef {
  const [given, ...extra] = args;
  if (given === undefined)
    throw new UsageError(`"explain" needs one argument ${ARGUMENT}, e.g. explain team-a/train-0`);
  if (extra.length > 0) throw new UsageError(`"explain" takes one argument ${ARGUMENT}, got ${args.length}`);
  const parts = given.split('/');
  const [namespace = '', name = ''] = parts;
  if (parts.length !== 2 || !isDnsLabel(namespace) || !isDnsSubdomain(name)) {
    throw new UsageError(`${quoted(given)} is not ${ARGUMENT} (a namespace and a pod name, e.g. team-a/train-0)`);
  }
  return { namespace, name };
}

interface Page<T> {
  items: T[];
  metadata?: { _continue?: string };
}

async function listPages<T>(
  what: string,
  fetch: (next: string | undefined) => Promise<Page<T>>,
  maxPages = Infinity,
): Promise<T[]> {
  const items: T[] = [];
  let next: string | undefined;
  let pages = 0;
  try {
    do {
      const page = await fetch(next);
      items.push(...page.items);
      next = page.metadata?._continue === '' ? undefined : page.metadata?._continue;
      pages += 1;
    } while (next !== undefined && pages < maxPages);
  } catch (error) {
    throw new ExplainReadError(`could not list ${what}`, { cause: error });
  }
  return items;
}

function paged(next: string | undefined): { limit: number; _continue?: string } {
  return { limit: PAGE_SIZE, ...(next === undefined ? {} : { _continue: next }) };
}

interface ClusterRead {
  nodes: V1Node[];
  pods: V1Pod[];
  events: CoreV1Event[];
  /** The pod's namespace's ResourceQuotas; undefined when they may not be read (then no quota is judged). */
  quotas: V1ResourceQuota[] | undefined;
}

/**
 * The namespace's ResourceQuotas (the GPU quota filter checks), or undefined with one line on
 * stderr when the caller may not list them: the rest of the explanation is still worth having.
 */
async function readQuotas(
  core: CoreV1Api,
  namespace: string,
  stderr: (line: string) => void,
): Promise<V1ResourceQuota[] | undefined> {
  try {
    return await listPages(`the ResourceQuotas of namespace ${namespace}`, (next) =>
      core.listNamespacedResourceQuota({ namespace, ...paged(next) }),
    );
  } catch (error) {
    if (!(error instanceof ExplainReadError) || httpStatusOf(error.cause) !== 403) throw error;
    stderr(`vgpu-warden: may not list the ResourceQuotas of namespace ${namespace}; the GPU quota is not judged`);
    return undefined;
  }
}

/** Every node and every pod that can hold GPUs (filter's inputs), the namespace's quotas, and the pod's Events. */
async function readCluster(core: CoreV1Api, ref: PodRef, stderr: (line: string) => void): Promise<ClusterRead> {
  const [nodes, pods, events, quotas] = await Promise.all([
    listPages('nodes', (next) => core.listNode(paged(next))),
    // Finished pods hold no GPUs: the state store drops them anyway.
    listPages('pods', (next) =>
      core.listPodForAllNamespaces({ ...paged(next), fieldSelector: 'status.phase!=Succeeded,status.phase!=Failed' }),
    ),
    listPages(
      `the events of pod ${ref.namespace}/${ref.name}`,
      (next) =>
        core.listNamespacedEvent({
          namespace: ref.namespace,
          ...paged(next),
          fieldSelector: `involvedObject.kind=Pod,involvedObject.name=${ref.name}`,
        }),
      EVENT_PAGES,
    ),
    readQuotas(core, ref.namespace, stderr),
  ]);
  return { nodes, pods, events, quotas };
}

/** The locks on `nodes`, inspected and rowed exactly as `vgpu-warden locks` does. */
async function inspectLocks(
  locks: NodeLocks,
  nodes: readonly V1Node[],
  names: readonly string[],
  stderr: (line: string) => void,
): Promise<LockRow[]> {
  const rows: LockRow[] = [];
  for (const node of names) {
    try {
      const row = lockRowOf(await locks.inspect(node));
      if (row !== undefined) rows.push(row);
    } catch (error) {
      if (error instanceof NodeNotFoundError) continue;
      const raw =
        nodes.find((candidate) => candidate.metadata?.name === node)?.metadata?.annotations?.[NODE_LOCK_ANNOTATION] ??
        '';
      const problem = describeError(
        new ExplainReadError(`could not inspect the lock on node ${node}`, { cause: error }),
      );
      stderr(`vgpu-warden: ${problem}`);
      rows.push(failedLockRow(node, raw, parseLockValue(raw), problem));
    }
  }
  return rows;
}

function settingsOf(config: Config): ExplainSettings {
  return {
    defaults: {
      nodePolicy: config.nodeSchedulerPolicy,
      gpuPolicy: config.gpuSchedulerPolicy,
      requestDefaults: DEFAULT_REQUEST_DEFAULTS,
    },
    mutation: podMutationConfig(config),
  };
}

/**
 * `vgpu-warden explain <namespace>/<pod>` (also `kubectl vgpu-warden explain`): why a GPU pod is
 * Pending or where it went, in one screen. Reads only: the pod, one LIST of nodes and pods fed
 * into the state store filter uses (so each node's verdict comes from filter's own code), the
 * pod's Events, and the locks that concern it (inspected as `locks` does). Exit 1 with one line
 * when the pod does not exist or the cluster cannot be read; exit 2 for a bad argument.
 */
export function explainCommand(): Command {
  const command = {
    name: 'explain',
    summary: `why a GPU pod is Pending or where it went: explain ${ARGUMENT}`,
    arguments: ARGUMENT,
    usesConfig: true,
    // It judges the pod as the webhook, filter and the lock rules would: their settings, nothing else.
    settings: ['cluster', 'lockRules', 'webhook', 'extender'],
    flags: {
      output: { type: 'string', short: 'o', description: 'output format: text (default) or json' },
      kubeconfig: configFlag('kubeconfig'),
      context: contextFlag(),
      'scheduler-name': configFlag('scheduler-name'),
      'overwrite-default-scheduler': configFlag('overwrite-default-scheduler'),
      'default-gpu-num': configFlag('default-gpu-num'),
      'node-scheduler-policy': configFlag('node-scheduler-policy'),
      'gpu-scheduler-policy': configFlag('gpu-scheduler-policy'),
      'bind-grace': configFlag('bind-grace'),
      'nodelock-expire': configFlag('nodelock-expire'),
      'nodelock-force-after': configFlag('nodelock-force-after'),
    },
    run: async (context: CommandContext): Promise<number> => {
      const { io, flags } = context;
      // Checked before any API call, so a typo costs nothing.
      const output = outputOf(flags.output);
      const ref = parsePodArgument(context.positionals);
      const config = context.config();
      const kubeConfig = loadKubeConfig(config.kubeconfig, kubeconfigSources(io.env), contextOf(flags));
      try {
        const core = kubeConfig.makeApiClient(CoreV1Api);
        let pod: V1Pod;
        try {
          pod = await core.readNamespacedPod({ name: ref.name, namespace: ref.namespace });
        } catch (error) {
          if (isNotFound(error)) {
            io.stderr(`vgpu-warden: pod ${ref.namespace}/${ref.name} not found`);
            return EXIT_FAILURE;
          }
          throw new ExplainReadError(`could not read pod ${ref.namespace}/${ref.name}`, { cause: error });
        }
        const read = await readCluster(core, ref, io.stderr);
        const settings = settingsOf(config);
        const cache = await snapshotCache(read.nodes, read.pods, read.quotas);
        const placement = placementFor(pod, cache, settings);
        const locks = new NodeLocks({
          api: new KubeNodeLockApi(core),
          config: {
            bindGraceMs: config.bindGraceMs,
            expireMs: config.nodeLockExpireMs,
            forceAfterMs: config.nodeLockForceAfterMs,
          },
        });
        const lockRows = await inspectLocks(
          locks,
          read.nodes,
          lockNodesToInspect(pod, cache, read.events, placement),
          io.stderr,
        );
        const now = new Date();
        const explanation = explainPod({ pod, placement, events: read.events, locks: lockRows, now, settings });
        if (output === 'json') io.stdout(explanationJson(explanation));
        else
          explanationText(explanation, now).forEach((line) => {
            io.stdout(line);
          });
        return EXIT_OK;
      } finally {
        await kubeConfig.close();
      }
    },
  } satisfies Command;
  return command;
}
