import type { NodePolicy } from '../devices/score.js';
import { GPU_MANAGED_RESOURCES } from '../hami/wire.js';

/**
 * The one KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) that runs kube-scheduler with
 * vgpu-warden: a profile with our scheduler name and one extender for filter, prioritize and bind
 * over TLS (on loopback, or over the network with kube-scheduler's client certificate). Used by the
 * e2e tests, local mode and manifests/ (a unit test keeps the manifest equal to what this builds).
 *
 * How the node policy (NODE_SCHEDULER_POLICY) decides placement through kube-scheduler 1.30 to 1.37:
 *
 * - kube-scheduler adds the extender's score to its own score plugins' as
 *   `score * weight * (MaxNodeScore 100 / MaxExtenderPriority 10)` (pkg/scheduler/schedule_one.go,
 *   prioritizeNodes). Each score plugin gives 0..100 times its weight, and the default profile's
 *   score plugins weigh TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1, PodTopologySpread 2,
 *   InterPodAffinity 2, NodeResourcesBalancedAllocation 1, ImageLocality 1 and VolumeBinding 1
 *   (pkg/scheduler/apis/config/v1/default_plugins.go; no weight means 1), and from 1.37 on
 *   DynamicResources 2 (it scores nodes for pods with ResourceClaims): together they can tell two
 *   nodes apart by at most 15 * 100 = 1500. At weight 1 one extender point is worth 10, so
 *   NodeResourcesFit's LeastAllocated and PodTopologySpread's system default constraints (hostname
 *   maxSkew 3 and zone maxSkew 5, ScheduleAnyway, for pods selected by a Service, ReplicaSet,
 *   StatefulSet or ReplicationController) spread GPU pods whatever the node policy says.
 *   EXTENDER_WEIGHT makes one point worth 1510: any difference in our 0..10 score beats every
 *   plugin together, and the plugins only break ties between nodes with the same score. That also
 *   keeps the pod annotation hami.io/node-scheduler-policy in charge when it names the other
 *   policy. Hard constraints (filters: taints, required affinity, DoNotSchedule spread, resources)
 *   are untouched; the soft preferences of GPU pods (preferred affinity, PreferNoSchedule taints,
 *   ScheduleAnyway spread) become tie-breakers.
 * - Ties are common: the score is a rounded 0..10, so a node gains a point only every few small
 *   pods (1 GPU + 2000 MiB on 4 x 24 GiB GPUs: about every 6 or 7). The profile's plugins must
 *   therefore break ties in the policy's direction, or binpack still spreads within a tie.
 *   binpack: NodeResourcesFit scores MostAllocated (the busiest node by cpu and memory requests);
 *   NodeResourcesBalancedAllocation is disabled (it favours nodes whose cpu and memory shares are
 *   alike, usually the empty ones); PodTopologySpread keeps the pod's own constraints but loses the
 *   system default constraints (defaultingType List, none), which spread every Deployment.
 *   spread: the stock plugins, which all spread already; NodeResourcesFit LeastAllocated, spelled out.
 *
 * NODE_SCHEDULER_POLICY and the configuration kube-scheduler runs with must name the same policy;
 * the shipped manifests are built for binpack, the default.
 */

/** kube-scheduler's MaxNodeScore and the extender protocol's MaxExtenderPriority (the same 1.30 to 1.37). */
export const MAX_NODE_SCORE = 100;
export const MAX_EXTENDER_PRIORITY = 10;

/**
 * Weights of kube-scheduler's default score plugins (default_plugins.go), the most of each over the
 * claimed versions 1.30 to 1.37: DynamicResources scores only from 1.37 (weight 2; in 1.34 to 1.36 it
 * is enabled without a Score), the others are the same in all of them.
 */
export const DEFAULT_SCORE_PLUGIN_WEIGHTS: Readonly<Record<string, number>> = {
  TaintToleration: 3,
  NodeAffinity: 2,
  NodeResourcesFit: 1,
  PodTopologySpread: 2,
  InterPodAffinity: 2,
  NodeResourcesBalancedAllocation: 1,
  ImageLocality: 1,
  VolumeBinding: 1,
  DynamicResources: 2,
};

/** The most the score plugins together can tell two nodes apart by: 1500. */
const MAX_PLUGIN_DIFFERENCE =
  Object.values(DEFAULT_SCORE_PLUGIN_WEIGHTS).reduce((sum, weight) => sum + weight, 0) * MAX_NODE_SCORE;

/** The smallest weight at which one point of our 0..10 score outweighs all score plugins: 151. */
export const EXTENDER_WEIGHT = Math.floor(MAX_PLUGIN_DIFFERENCE / (MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY)) + 1;

export interface SchedulerConfigOptions {
  schedulerName: string;
  /** e.g. https://127.0.0.1:9444; the verbs are appended. */
  extenderUrl: string;
  /** The extender's NODE_SCHEDULER_POLICY; the GPU profile's score plugins follow it. Default binpack. */
  nodePolicy?: NodePolicy;
  /**
   * CA that signed the extender's certificate, inline; without it
   * or clientTls the scheduler skips verification (loopback only).
   */
  caPem?: string;
  /**
   * Mutual TLS from files, as the extender requires off loopback (EXTENDER_CLIENT_AUTH): the client
   * certificate and key kube-scheduler presents and the CAs it verifies the extender with, e.g. the
   * mounted Secret EXTENDER_CLIENT_SECRET_NAME. kube-scheduler re-reads certFile and keyFile on new
   * connections (so a renewed client certificate needs no restart) but caFile only at start.
   */
  clientTls?: { certFile: string; keyFile: string; caFile: string };
  /** Also keep a default-scheduler profile (tests and local mode schedule plain pods too). */
  includeDefaultProfile?: boolean;
  leaderElection?: { leaderElect: boolean; resourceNamespace?: string; resourceName?: string };
  kubeconfigPath?: string;
}

/**
 * The binpack GPU profile's percentageOfNodesToScore: kube-scheduler filters every node and sends the
 * extender every feasible name. Left to its adaptive default, above 100 nodes kube-scheduler stops
 * once it has found a share of them (about 42 % at 1000 nodes, 10 % at 5000), starting each cycle
 * where the last one stopped, so each pod of a burst was placed within another window: binpack's
 * packing plan put a burst that 5 nodes hold on 14 nodes at 1000 and 41 at 5000 (docs/extender.md,
 * "Placement at cluster scale", has the cost).
 */
const EVERY_FEASIBLE_NODE = 100;

/** The GPU profile's plugins and their arguments for a node policy (see the top of this file). */
function gpuProfile(schedulerName: string, nodePolicy: NodePolicy): Record<string, unknown> {
  const cpuAndMemory = [
    { name: 'cpu', weight: 1 },
    { name: 'memory', weight: 1 },
  ];
  if (nodePolicy === 'spread') {
    // No percentageOfNodesToScore: spread names the emptiest node of whatever sample it is sent, and
    // each cycle's sample starts where the last one stopped, so a burst still gets distinct nodes while
    // kube-scheduler filters a tenth of 5000 nodes instead of all (docs/extender.md has the numbers).
    return {
      schedulerName,
      pluginConfig: [
        { name: 'NodeResourcesFit', args: { scoringStrategy: { type: 'LeastAllocated', resources: cpuAndMemory } } },
      ],
    };
  }
  return {
    schedulerName,
    percentageOfNodesToScore: EVERY_FEASIBLE_NODE,
    plugins: { multiPoint: { disabled: [{ name: 'NodeResourcesBalancedAllocation' }] } },
    pluginConfig: [
      { name: 'NodeResourcesFit', args: { scoringStrategy: { type: 'MostAllocated', resources: cpuAndMemory } } },
      { name: 'PodTopologySpread', args: { defaultingType: 'List', defaultConstraints: [] } },
    ],
  };
}

function tlsConfigOf(options: SchedulerConfigOptions): Record<string, unknown> {
  if (options.clientTls !== undefined && options.caPem !== undefined)
    throw new TypeError('give the extender CA either inline (caPem) or as a file (clientTls), not both');
  if (options.clientTls !== undefined) return { ...options.clientTls };
  return options.caPem === undefined ? { insecure: true } : { caData: Buffer.from(options.caPem).toString('base64') };
}

export function kubeSchedulerConfiguration(options: SchedulerConfigOptions): Record<string, unknown> {
  return {
    apiVersion: 'kubescheduler.config.k8s.io/v1',
    kind: 'KubeSchedulerConfiguration',
    ...(options.kubeconfigPath === undefined ? {} : { clientConnection: { kubeconfig: options.kubeconfigPath } }),
    leaderElection: options.leaderElection ?? { leaderElect: false },
    profiles: [
      ...(options.includeDefaultProfile === true ? [{ schedulerName: 'default-scheduler' }] : []),
      gpuProfile(options.schedulerName, options.nodePolicy ?? 'binpack'),
    ],
    extenders: [
      {
        urlPrefix: options.extenderUrl,
        filterVerb: 'filter',
        prioritizeVerb: 'prioritize',
        bindVerb: 'bind',
        weight: EXTENDER_WEIGHT,
        enableHTTPS: true,
        tlsConfig: tlsConfigOf(options),
        nodeCacheCapable: true,
        // The extender's bind waits for a busy node's lock for up to BIND_LOCK_WAIT (25 s): stay above it.
        httpTimeout: '30s',
        ignorable: false,
        managedResources: GPU_MANAGED_RESOURCES.map((name) => ({ name, ignoredByScheduler: true })),
      },
    ],
  };
}
