/**
 * A stand-in for HAMi's NVIDIA device plugin (v2.10), written from the wire contract
 * (../shared/reference/hami-wire-contract.md §1.5, §4.6, §5) and sharing no code with src/.
 *
 * kubelet calls Allocate for one container of the pod it is admitting, and the call carries no pod
 * identity. Like HAMi, the stand-in then works out "the pod being allocated" from the node lock
 * (GetPendingPod), which may be a different pod from the one kubelet admits. Every call leaves an
 * AllocateRecord saying whose devices it got and, when the caller knows it (the kubelet simulator
 * does, a real kubelet's gRPC call does not: see grpc-device-plugin.ts), which pod kubelet
 * admitted: `admitted` vs `resolvedTo` is what the invariant "no pod is admitted with devices
 * assigned to another pod" checks.
 *
 * Per call, as HAMi's Allocate (§5):
 * 1. GetPendingPod; failure → error, no annotation change, lock kept;
 * 2. decode the pod's hami.io/vgpu-devices-to-allocate (missing → `device request not found`);
 * 3. the first non-empty piece is this container's; its device count must equal kubelet's request;
 * 4. patch the annotation with that piece blanked (by pod name, no UID);
 * 5. re-read the pod: nothing NVIDIA left → bind-phase=success, ReleaseNodeLock (owner-checked);
 * 6. any failure after step 1 → bind-phase=failed, ReleaseNodeLock (owner-checked), error.
 * Calls on one node are serialised, as HAMi's plugin-wide mutex does.
 *
 * Two changes on HAMi's main branch after v2.10.0, each an option (default off: v2.10):
 * - `refuseOversized` (HAMi #3075, merged): after the count check of step 3, the piece is compared
 *   with the resolved container's own limits and a larger allocation fails as in step 6
 *   (container-request.ts);
 * - `lockOnly` (HAMi #3095, open): GetPendingPod serves only the pod the lock names, no list
 *   fallback (pending-pod.ts).
 */
import { randomUUID } from 'node:crypto';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { containerRequest, needsCardMemory, oversizedAllocation, type RequestDefaults } from './container-request.js';
import { decodeRegisteredGpus, replicaIds } from './device-inventory.js';
import { releaseNodeLock, type ReleaseOutcome } from './node-lock.js';
import { getPendingPod } from './pending-pod.js';
import type { PluginApi } from './plugin-api.js';
import {
  decodePodDevices,
  encodePodDevices,
  eraseNextDeviceRequest,
  nextDeviceRequest,
  type HamiDevice,
  type PodDeviceEntries,
} from './pod-devices.js';
import {
  BIND_PHASE,
  BIND_PHASE_FAILED,
  BIND_PHASE_SUCCESS,
  DEFAULT_VENDOR_WORDS,
  DEVICES_TO_ALLOCATE,
  NODE_REGISTER,
  NVIDIA,
} from './wire.js';

export interface PodIdentity {
  namespace: string;
  name: string;
  uid: string;
}

/**
 * What the caller of Allocate knows of the pod kubelet admits: `PodIdentity` when it always knows
 * (the kubelet simulator: the default), `Admission` (PodIdentity | undefined) when it may not (a real
 * kubelet's gRPC call carries no pod identity). HamiDevicePlugin, its requests and records take it
 * as a type parameter, so the simulator's callers keep `admitted` and `container` required.
 */
export type Admission = PodIdentity | undefined;

/** `admitted` and `container`: required when `A` is PodIdentity, optional otherwise. */
export type AdmittedFields<A extends Admission> = [A] extends [PodIdentity]
  ? {
      /** The pod kubelet admits. The real RPC does not carry it; the stand-in only records it. */
      admitted: PodIdentity;
      /** The admitted pod's container kubelet allocates for. Recorded only. */
      container: string;
    }
  : {
      /** The pod kubelet admits, when the caller knows it (never for calls through gRPC). Recorded only. */
      admitted?: PodIdentity;
      /** The admitted pod's container, when known. Recorded only. */
      container?: string;
    };

/** One kubelet Allocate call: one container of the pod kubelet is admitting. */
export type AllocateRequest<A extends Admission = PodIdentity> = AllocateRequestFields & AdmittedFields<A>;

export interface AllocateRequestFields {
  node: string;
  /** The replica IDs kubelet picked (`<UUID>-<i>`); HAMi only checks their number. */
  deviceIds: readonly string[];
  /**
   * Aborted when the plugin process serving this call dies (GrpcDevicePluginServer.stop()): a call
   * still queued or stalled then fails with PluginStoppedError, and a call between its lookup and
   * its annotation patch stops there, writing nothing more (a killed process writes nothing).
   */
  signal?: AbortSignal;
  /** How the call arrived: `grpc` for kubelet's real v1beta1 RPC; absent for a direct call. */
  transport?: 'grpc';
}

/** What the stand-in does with one call (see HamiDevicePluginOptions.behaviour). */
export type AllocateAction =
  /** Allocate as HAMi does; `afterLookupDelayMs` widens the window between GetPendingPod and the annotation patch. */
  | { kind: 'allocate'; afterLookupDelayMs?: number }
  /**
   * Fail the call. `after-lookup` (default) fails as HAMi's PodAllocationFailed does: bind-phase=failed
   * on the resolved pod and its lock released. `before-lookup` fails like a plugin that errors before
   * reading anything: no annotation or lock change.
   */
  | { kind: 'fail'; stage?: 'before-lookup' | 'after-lookup'; message?: string }
  /**
   * Never answer (the per-node mutex stays held, so later calls on the node queue behind it). With
   * `forMs` the call fails after that long as a broken gRPC connection does (plugin restart), with
   * no annotation or lock change.
   */
  | { kind: 'stall'; forMs?: number };

/** What one Allocate call did; `admitted`/`container` as the request had them (see Admission). */
export type AllocateRecord<A extends Admission = PodIdentity> = AllocateRecordFields & AdmittedFields<A>;

export interface AllocateRecordFields {
  /** Order of the record among all records of this plugin. */
  seq: number;
  /** When the call answered (for a `stalled` record: when the stall began). */
  at: Date;
  node: string;
  /** The device IDs kubelet sent (`devices_ids` of the gRPC ContainerAllocateRequest). */
  deviceIds: readonly string[];
  /** `grpc` when the call came through kubelet's v1beta1 Allocate RPC. */
  transport?: 'grpc';
  /**
   * - allocated: the call answered with devices (`devices` from `resolvedTo`'s annotation);
   * - failed: the call answered with an error (`error`);
   * - stalled: the call will not answer (a `failed` record follows if the stall has `forMs`).
   */
  outcome: 'allocated' | 'failed' | 'stalled';
  /** The pod GetPendingPod found, when it found one. */
  resolvedTo?: PodIdentity;
  /** How it was found: through the lock, or through HAMi's list fallback. */
  via?: 'lock' | 'fallback';
  /** The node lock value GetPendingPod read. */
  lock?: string;
  /** The devices handed out (allocated only). */
  devices: HamiDevice[];
  /** The container environment answered (allocated only): ContainerAllocateResponse.envs over gRPC. */
  envs?: Record<string, string>;
  /** Index of the consumed piece in `resolvedTo`'s annotation (containers, init first). */
  segment?: number;
  /** `resolvedTo`'s container at that index (HAMi's view of whose container this is). */
  resolvedContainer?: string;
  /** bind-phase written on `resolvedTo` by this call, if any. */
  bindPhase?: 'success' | 'failed';
  /** What ReleaseNodeLock did, if this call ran it ('error' when it failed). */
  lockRelease?: ReleaseOutcome | 'error';
  error?: string;
}

export interface AllocateResponse<A extends Admission = PodIdentity> {
  /**
   * The container environment HAMi returns: NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_MEMORY_LIMIT_<i>,
   * CUDA_DEVICE_SM_LIMIT, CUDA_DEVICE_MEMORY_SHARED_CACHE, LIBCUDA_LOG_LEVEL (see environmentOf).
   */
  envs: Record<string, string>;
  devices: HamiDevice[];
  record: AllocateRecord<A>;
}

/** The error an Allocate answers with; kubelet sees `rpc error: code = <code> desc = <message>`. */
export class AllocateError extends Error {
  constructor(
    message: string,
    readonly code: 'Unknown' | 'Unavailable' = 'Unknown',
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'AllocateError';
  }
}

/** Options that contradict each other (the stand-in refuses them rather than pick one). */
export class PluginOptionsError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PluginOptionsError';
  }
}

/** The plugin was stopped while a call waited or stalled, or a call came after stop(). */
export class PluginStoppedError extends AllocateError {
  constructor() {
    super('device plugin stopped', 'Unavailable');
    this.name = 'PluginStoppedError';
  }
}

export interface HamiDevicePluginOptions<A extends Admission = PodIdentity> {
  api: PluginApi;
  /** HAMi's list fallback when the lock names no pod (default false: no lock → the call fails). */
  fallback?: boolean;
  /**
   * HAMi #3095 (open PR on main): serve only the pod the node lock names. No lock, a lock naming no
   * pod, or a named pod that cannot be read fails the call, and the pod list is never read.
   * Excludes `fallback: true` (the constructor throws PluginOptionsError). Default false.
   */
  lockOnly?: boolean;
  /**
   * HAMi #3075 (merged on main after v2.10.0): refuse an allocation giving the container more
   * memory or cores on a device than its own limits request, as PodAllocationFailed (bind-phase
   * failed, lock released). Default false (v2.10 trusts the annotation).
   */
  refuseOversized?: boolean;
  /** The device config's request defaults #3075 derives requests with (chart: 0, 0, 1). */
  requestDefaults?: RequestDefaults;
  /** Time each call takes before it looks anything up (kubelet → plugin latency); default 0. */
  delayMs?: number | ((request: AllocateRequest<A>) => number);
  /** Per call; default: allocate. */
  behaviour?: (request: AllocateRequest<A>) => AllocateAction;
  /** Backend words that mean "more to allocate" (default ['NVIDIA']). */
  vendorWords?: readonly string[];
  /** HAMi's HOOK_PATH (default `/usr/local`): the shared cache is `<hookPath>/vgpu/<uuid4>.cache`. */
  hookPath?: string;
  /** HAMi's libCudaLogLevel (default 1) → env LIBCUDA_LOG_LEVEL. */
  libCudaLogLevel?: number;
  /** The uuid4 of each container's shared cache file (default crypto.randomUUID, as HAMi's uuid.New()). */
  cacheId?: () => string;
  /** Called with every record as it is made. */
  onRecord?: (record: AllocateRecord<A>) => void;
  log?: (line: string) => void;
  clock?: () => Date;
  sleep?: (ms: number) => Promise<void>;
  /** For ReleaseNodeLock's retry jitter; default a constant 0.5, so runs replay. */
  random?: () => number;
}

/** The parts of a record a call fills in as it goes. */
type RecordDetail = Partial<
  Pick<
    AllocateRecordFields,
    | 'resolvedTo'
    | 'via'
    | 'lock'
    | 'devices'
    | 'envs'
    | 'segment'
    | 'resolvedContainer'
    | 'bindPhase'
    | 'lockRelease'
    | 'error'
  >
>;

/** One container request of kubelet's GetPreferredAllocation (v1beta1 ContainerPreferredAllocationRequest). */
export interface PreferredAllocationRequest {
  available: readonly string[];
  mustInclude: readonly string[];
  size: number;
}

/** A device as ListAndWatch reports it (v1beta1 Device without topology: HAMi's default, no NUMA). */
export interface KubeletDevice {
  id: string;
  health: 'Healthy' | 'Unhealthy';
}

function identityOf(pod: V1Pod): PodIdentity {
  return { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '' };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** HAMi's container order for annotation pieces: init containers first. */
function containersOf(pod: V1Pod): V1Container[] {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
}

/**
 * The environment HAMi's Allocate answers for one container (§5 step 3; real-nodes.md "HAMi's own
 * NVIDIA device plugin v2.10"): with the chart's defaults no CUDA_OVERSUBSCRIBE (memory scaling 1)
 * and no GPU_CORE_UTILIZATION_POLICY (core policy default). HAMi's mounts (libvgpu.so,
 * /etc/ld.so.preload, the cache folder, /tmp/vgpulock) are not part of this: the stand-in has no
 * libvgpu.so to mount.
 */
function environmentOf(
  devices: readonly HamiDevice[],
  settings: { hookPath: string; libCudaLogLevel: number; cacheId: () => string },
): Record<string, string> {
  const envs: Record<string, string> = { NVIDIA_VISIBLE_DEVICES: devices.map((device) => device.uuid).join(',') };
  devices.forEach((device, index) => {
    envs[`CUDA_DEVICE_MEMORY_LIMIT_${index}`] = `${device.usedMem}m`;
  });
  if (devices[0] !== undefined) envs.CUDA_DEVICE_SM_LIMIT = String(devices[0].usedCores);
  envs.CUDA_DEVICE_MEMORY_SHARED_CACHE = `${settings.hookPath}/vgpu/${settings.cacheId()}.cache`;
  envs.LIBCUDA_LOG_LEVEL = String(settings.libCudaLogLevel);
  return envs;
}

/** The GPU of a replica ID `<UUID>-<i>`. */
function gpuOfReplica(id: string): string {
  const dash = id.lastIndexOf('-');
  return dash < 0 ? id : id.slice(0, dash);
}

/**
 * One container's preferred IDs: kubelet's must-include first, then for each annotated GPU not yet
 * covered an available replica of it, then the first available IDs until `size`.
 */
function preferFor(request: PreferredAllocationRequest, devices: readonly HamiDevice[]): string[] {
  const chosen = [...request.mustInclude];
  const covered = new Set<string>();
  for (const device of devices) {
    if (chosen.length >= request.size) break;
    const mine = chosen.find((id) => gpuOfReplica(id) === device.uuid && !covered.has(id));
    if (mine !== undefined) {
      covered.add(mine);
      continue;
    }
    const pick = request.available.find((id) => gpuOfReplica(id) === device.uuid && !chosen.includes(id));
    if (pick !== undefined) {
      chosen.push(pick);
      covered.add(pick);
    }
  }
  for (const id of request.available) {
    if (chosen.length >= request.size) break;
    if (!chosen.includes(id)) chosen.push(id);
  }
  return chosen.slice(0, Math.max(request.size, request.mustInclude.length));
}

/** The request's pod and container as far as the caller knew them. */
function known(request: AllocateRequest<Admission>): {
  admitted: PodIdentity | undefined;
  container: string | undefined;
} {
  return { admitted: request.admitted, container: request.container };
}

/** Whether the process serving the call died (read afresh at each step). */
function aborted(request: AllocateRequestFields): boolean {
  return request.signal?.aborted === true;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Thrown inside a call to end it with a record already made. */
class Answered extends Error {
  constructor(readonly error: AllocateError) {
    super(error.message);
  }
}

/** The pod GetPendingPod found, and what the call's record says of it. */
interface Resolved {
  pod: V1Pod;
  resolved: Pick<RecordDetail, 'resolvedTo' | 'via' | 'lock'>;
}

/** The piece of the resolved pod's annotation a call consumes: the container's devices. */
interface Piece {
  /** The decoded annotation, the piece still in it. */
  entries: PodDeviceEntries;
  /** The piece's NVIDIA devices. */
  devices: HamiDevice[];
  position: { segment: number; resolvedContainer: string };
}

/** Fails a call after its lookup as HAMi's PodAllocationFailed does (bind-phase=failed, lock released). */
type FailAllocation = (message: string, cause?: unknown, detail?: RecordDetail) => Promise<Answered>;

export class HamiDevicePlugin<in out A extends Admission = PodIdentity> {
  private readonly api: PluginApi;
  private readonly clock: () => Date;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly vendorWords: readonly string[];
  private readonly tails = new Map<string, Promise<unknown>>();
  private readonly stalls = new Set<{ reject: (error: Error) => void; timer: NodeJS.Timeout | undefined }>();
  private readonly history: AllocateRecord<A>[] = [];
  /** Nodes whose plugin process is down (stopReporting): no ListAndWatch devices, no Allocate. */
  private readonly silenced = new Set<string>();
  private readonly reportingListeners = new Set<(node: string, reporting: boolean) => void>();
  private stopped = false;

  constructor(private readonly options: HamiDevicePluginOptions<A>) {
    if (options.lockOnly === true && options.fallback === true) {
      throw new PluginOptionsError(
        'lockOnly (HAMi #3095) removes the list fallback: fallback and lockOnly cannot both be on',
      );
    }
    this.api = options.api;
    this.clock = options.clock ?? (() => new Date());
    this.sleep = options.sleep ?? realSleep;
    this.random = options.random ?? (() => 0.5);
    this.vendorWords = options.vendorWords ?? DEFAULT_VENDOR_WORDS;
  }

  private lookup(): { fallback: boolean; lockOnly: boolean } {
    return { fallback: this.options.fallback === true, lockOnly: this.options.lockOnly === true };
  }

  /** Every record so far, in order. */
  get records(): readonly AllocateRecord<A>[] {
    return this.history;
  }

  /**
   * Allocations where kubelet's pod got another pod's devices (a different UID): invariant 7 broken.
   * Only records that know the admitted pod are judged (not those of real kubelets over gRPC).
   */
  foreignAllocations(): AllocateRecord<A>[] {
    return this.history.filter((record) => {
      const admitted: PodIdentity | undefined = record.admitted;
      return record.outcome === 'allocated' && admitted !== undefined && record.resolvedTo?.uid !== admitted.uid;
    });
  }

  /**
   * The plugin on `node` dies (its pod is killed, its socket gone): ListAndWatch reports no devices,
   * so kubelet publishes allocatable nvidia.com/gpu 0, and Allocate there fails. The register
   * annotation stays on the node, as it does when HAMi's plugin dies.
   */
  stopReporting(node: string): void {
    if (this.silenced.has(node)) return;
    this.silenced.add(node);
    this.notifyReporting(node, false);
  }

  /** The plugin on `node` is back: ListAndWatch reports its devices again. */
  reportAgain(node: string): void {
    if (!this.silenced.delete(node)) return;
    this.notifyReporting(node, true);
  }

  isReporting(node: string): boolean {
    return !this.silenced.has(node);
  }

  /** Calls `listener` when a node's plugin stops or starts reporting (kubelet re-reads ListAndWatch). */
  onReportingChange(listener: (node: string, reporting: boolean) => void): () => void {
    this.reportingListeners.add(listener);
    return () => {
      this.reportingListeners.delete(listener);
    };
  }

  private notifyReporting(node: string, reporting: boolean): void {
    for (const listener of [...this.reportingListeners]) {
      try {
        listener(node, reporting);
      } catch {
        // An observer must not change what the plugin does.
      }
    }
  }

  /** ListAndWatch's device list for `node`: the replica IDs of its healthy registered GPUs (none while it is down). */
  async listDevices(node: string): Promise<string[]> {
    if (this.silenced.has(node)) return [];
    const inventory = (await this.api.readNode(node)).metadata?.annotations?.[NODE_REGISTER];
    return inventory === undefined ? [] : replicaIds(decodeRegisteredGpus(inventory));
  }

  /**
   * ListAndWatch's devices with their health, as HAMi sends them: every replica of every registered
   * GPU, `Unhealthy` for an unhealthy GPU (kubelet counts those in capacity, not in allocatable).
   * None while the node's plugin is down.
   */
  async listKubeletDevices(node: string): Promise<KubeletDevice[]> {
    if (this.silenced.has(node)) return [];
    const inventory = (await this.api.readNode(node)).metadata?.annotations?.[NODE_REGISTER];
    if (inventory === undefined) return [];
    return decodeRegisteredGpus(inventory).flatMap((gpu) =>
      Array.from({ length: gpu.count }, (_, index): KubeletDevice => ({
        id: `${gpu.uuid}-${index}`,
        health: gpu.healthy ? 'Healthy' : 'Unhealthy',
      })),
    );
  }

  /**
   * kubelet's GetPreferredAllocation (§5): container request i is mapped onto the i-th non-empty
   * piece of the pending pod's hami.io/vgpu-devices-to-allocate, and available replicas of those
   * GPUs are preferred. When the pod or its annotation cannot be read, kubelet's must-include IDs
   * and then the first available ones (no pod-specific preference). Reads only; no record.
   */
  async preferredAllocation(node: string, requests: readonly PreferredAllocationRequest[]): Promise<string[][]> {
    let pieces: HamiDevice[][] = [];
    try {
      const pending = await getPendingPod(this.api, node, this.lookup());
      const annotation = pending.pod.metadata?.annotations?.[DEVICES_TO_ALLOCATE];
      if (annotation !== undefined)
        pieces = decodePodDevices(annotation)
          .map((devices) => devices.filter((device) => device.type === NVIDIA))
          .filter((devices) => devices.length > 0);
    } catch (error) {
      this.options.log?.(
        `GetPreferredAllocation on ${node}: no pending pod to prefer devices for (${describe(error)})`,
      );
    }
    return requests.map((request, index) => preferFor(request, pieces[index] ?? []));
  }

  /** kubelet's Allocate for one container; rejects with AllocateError as HAMi answers an error. */
  allocate(request: AllocateRequest<A>): Promise<AllocateResponse<A>> {
    if (this.stopped) return Promise.reject(new PluginStoppedError());
    if (aborted(request)) return Promise.reject(this.fail(request, new PluginStoppedError()).error);
    if (this.silenced.has(request.node)) {
      // kubelet finds no endpoint for the resource: the call never reaches a plugin.
      return Promise.reject(
        this.fail(request, new AllocateError(`device plugin on ${request.node} is not running`, 'Unavailable')).error,
      );
    }
    const previous = this.tails.get(request.node) ?? Promise.resolve();
    const call = previous.then(() => {
      if (this.stopped) throw new PluginStoppedError();
      if (aborted(request)) throw this.fail(request, new PluginStoppedError());
      return this.allocateInTurn(request);
    });
    const tail = call.catch(() => undefined);
    this.tails.set(request.node, tail);
    void tail.then(() => {
      if (this.tails.get(request.node) === tail) this.tails.delete(request.node);
    });
    return call.catch((error: unknown) => {
      throw error instanceof Answered ? error.error : error;
    });
  }

  /** Fails every stalled call and every later one with PluginStoppedError. */
  stop(): void {
    this.stopped = true;
    for (const stall of this.stalls) {
      if (stall.timer !== undefined) clearTimeout(stall.timer);
      stall.reject(new PluginStoppedError());
    }
    this.stalls.clear();
  }

  private record(
    request: AllocateRequest<A>,
    outcome: AllocateRecordFields['outcome'],
    detail: RecordDetail = {},
  ): AllocateRecord<A> {
    const { admitted, container } = known(request);
    // Carries `admitted`/`container` exactly when the request did, which is what AdmittedFields<A> says.
    const record = {
      seq: this.history.length + 1,
      at: this.clock(),
      node: request.node,
      ...(admitted === undefined ? {} : { admitted }),
      ...(container === undefined ? {} : { container }),
      deviceIds: request.deviceIds,
      ...(request.transport === undefined ? {} : { transport: request.transport }),
      outcome,
      ...detail,
      devices: detail.devices ?? [],
    } as AllocateRecord<A>;
    this.history.push(record);
    try {
      this.options.onRecord?.(record);
    } catch {
      // An observer must not change what the plugin answers.
    }
    return record;
  }

  private fail(request: AllocateRequest<A>, error: AllocateError, detail: RecordDetail = {}): Answered {
    this.record(request, 'failed', { ...detail, error: error.message });
    const { admitted, container } = known(request);
    const target =
      admitted === undefined
        ? `devices ${request.deviceIds.join(',')}`
        : `${admitted.namespace}/${admitted.name}/${container ?? '?'}`;
    this.options.log?.(`Allocate on ${request.node} for ${target} failed: ${error.message}`);
    return new Answered(error);
  }

  private async allocateInTurn(request: AllocateRequest<A>): Promise<AllocateResponse<A>> {
    const action = this.options.behaviour?.(request) ?? { kind: 'allocate' };
    if (action.kind === 'stall') return this.stall(request, action.forMs);
    if (action.kind === 'fail' && action.stage === 'before-lookup') {
      throw this.fail(request, new AllocateError(action.message ?? 'simulated Allocate failure'));
    }
    await this.callLatency(request);
    const pending = await this.pendingPod(request);
    const failAllocation = this.allocationFailure(request, pending);
    if (action.kind === 'fail') throw await failAllocation(action.message ?? 'simulated Allocate failure');
    const piece = await this.nextPiece(request, pending, failAllocation);
    if (action.afterLookupDelayMs !== undefined) await this.sleep(action.afterLookupDelayMs);
    // The process died between the lookup and the patch: nothing more is written, the lock stays.
    if (aborted(request))
      throw this.fail(request, new PluginStoppedError(), { ...pending.resolved, ...piece.position });
    await this.consumePiece(pending.pod, piece.entries, failAllocation);
    return this.handOut(request, pending, piece);
  }

  /** The kubelet → plugin latency (`delayMs`), after which a call whose process died goes no further. */
  private async callLatency(request: AllocateRequest<A>): Promise<void> {
    const delay =
      typeof this.options.delayMs === 'function' ? this.options.delayMs(request) : (this.options.delayMs ?? 0);
    if (delay > 0) await this.sleep(delay);
    if (aborted(request)) throw this.fail(request, new PluginStoppedError());
  }

  /** §5 step 1: GetPendingPod; its failure fails the call with no annotation or lock change. */
  private async pendingPod(request: AllocateRequest<A>): Promise<Resolved> {
    let pending;
    try {
      pending = await getPendingPod(this.api, request.node, this.lookup());
    } catch (error) {
      throw this.fail(request, new AllocateError(describe(error), 'Unknown', { cause: error }));
    }
    return {
      pod: pending.pod,
      resolved: {
        resolvedTo: identityOf(pending.pod),
        via: pending.via,
        ...(pending.lock === undefined ? {} : { lock: pending.lock }),
      },
    };
  }

  /** §5 step 6 for this call: PodAllocationFailed on the resolved pod, then the failed record. */
  private allocationFailure(request: AllocateRequest<A>, { pod, resolved }: Resolved): FailAllocation {
    return async (message, cause, detail = {}) => {
      const after = await this.podAllocationFailed(request.node, pod);
      return this.fail(request, new AllocateError(message, 'Unknown', { cause }), { ...resolved, ...detail, ...after });
    };
  }

  /**
   * §5 steps 2 and 3: the resolved pod's first non-empty piece, which must exist, belong to one of
   * its containers, hold as many devices as kubelet asked for and (`refuseOversized`) fit that
   * container's own limits.
   */
  private async nextPiece(
    request: AllocateRequest<A>,
    { pod, resolved }: Resolved,
    failAllocation: FailAllocation,
  ): Promise<Piece> {
    const annotation = pod.metadata?.annotations?.[DEVICES_TO_ALLOCATE];
    if (annotation === undefined) throw await failAllocation('device request not found');
    let entries;
    try {
      entries = decodePodDevices(annotation);
    } catch (error) {
      throw await failAllocation(describe(error), error);
    }
    const next = nextDeviceRequest(entries);
    if (next === undefined) throw await failAllocation('device request not found');
    const containers = containersOf(pod);
    const resolvedContainer = containers[next.index]?.name;
    if (resolvedContainer === undefined) {
      // HAMi indexes the container list with the piece's position: out of range it panics before
      // PodAllocationFailed, so nothing is written and the lock stays.
      throw this.fail(
        request,
        new AllocateError(`runtime error: index out of range [${next.index}] with length ${containers.length}`),
        { ...resolved, segment: next.index },
      );
    }
    const position = { segment: next.index, resolvedContainer };
    if (next.devices.length !== request.deviceIds.length) throw await failAllocation('device number not matched');
    if (this.options.refuseOversized === true) {
      const refusal = await this.oversized(request.node, containers[next.index], resolvedContainer, next.devices);
      if (refusal !== undefined) throw await failAllocation(refusal, undefined, position);
    }
    return { entries, devices: next.devices, position };
  }

  /** §5 step 4: the annotation patched with the consumed piece blanked (by pod name, no UID). */
  private async consumePiece(pod: V1Pod, entries: PodDeviceEntries, failAllocation: FailAllocation): Promise<void> {
    try {
      await this.api.patchPodAnnotations(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '', {
        [DEVICES_TO_ALLOCATE]: encodePodDevices(eraseNextDeviceRequest(entries)),
      });
    } catch (error) {
      throw await failAllocation(`failed to patch ${DEVICES_TO_ALLOCATE}: ${describe(error)}`, error);
    }
  }

  /** §5 step 5 and the answer: PodAllocationTrySuccess, the container's environment, the record. */
  private async handOut(
    request: AllocateRequest<A>,
    { pod, resolved }: Resolved,
    { devices, position }: Piece,
  ): Promise<AllocateResponse<A>> {
    const after = await this.podAllocationTrySuccess(request.node, pod);
    const envs = environmentOf(devices, {
      hookPath: this.options.hookPath ?? '/usr/local',
      libCudaLogLevel: this.options.libCudaLogLevel ?? 1,
      cacheId: this.options.cacheId ?? randomUUID,
    });
    const record = this.record(request, 'allocated', { ...resolved, ...position, ...after, devices, envs });
    return { envs, devices, record };
  }

  /**
   * HAMi #3075 for the container the piece belongs to (the resolved pod's, as HAMi checks it, not
   * necessarily kubelet's). A percentage request is sized against the MiB this node's plugin
   * published for the card; HAMi asks its own device list, the stand-in reads the same number from
   * the inventory annotation. A node it cannot read leaves the memory unbounded, as an unknown card does.
   */
  private async oversized(
    node: string,
    container: V1Container | undefined,
    name: string,
    devices: readonly HamiDevice[],
  ): Promise<string | undefined> {
    const wanted = container === undefined ? undefined : containerRequest(container, this.options.requestDefaults);
    let cards = new Map<string, number>();
    if (needsCardMemory(wanted)) {
      try {
        const inventory = (await this.api.readNode(node)).metadata?.annotations?.[NODE_REGISTER];
        if (inventory !== undefined)
          cards = new Map(decodeRegisteredGpus(inventory).map((gpu) => [gpu.uuid, gpu.memoryMiB]));
      } catch (error) {
        this.options.log?.(
          `#3075 check on ${node}: the node inventory could not be read (${describe(error)}); ` +
            'percentage memory left unbounded',
        );
      }
    }
    return oversizedAllocation(name, wanted, devices, (uuid) => cards.get(uuid));
  }

  private stall(request: AllocateRequest<A>, forMs: number | undefined): Promise<never> {
    this.record(request, 'stalled');
    return new Promise<never>((_resolve, reject) => {
      const stall: { reject: (error: Error) => void; timer: NodeJS.Timeout | undefined } = { reject, timer: undefined };
      const onAbort = () => {
        if (!this.stalls.delete(stall)) return;
        if (stall.timer !== undefined) clearTimeout(stall.timer);
        reject(this.fail(request, new PluginStoppedError()));
      };
      if (forMs !== undefined) {
        stall.timer = setTimeout(() => {
          if (!this.stalls.delete(stall)) return;
          request.signal?.removeEventListener('abort', onAbort);
          reject(
            this.fail(
              request,
              new AllocateError('error reading from server: EOF (device plugin restarted)', 'Unavailable'),
            ),
          );
        }, forMs);
      }
      this.stalls.add(stall);
      request.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** §5 step 5: done only when no backend word is left in the re-read annotation. */
  private async podAllocationTrySuccess(
    node: string,
    pod: V1Pod,
  ): Promise<Pick<AllocateRecordFields, 'bindPhase' | 'lockRelease'>> {
    const { namespace, name } = identityOf(pod);
    let refreshed: V1Pod;
    try {
      refreshed = await this.api.readPod(namespace, name);
    } catch (error) {
      this.options.log?.(`PodAllocationTrySuccess: re-reading ${namespace}/${name} failed: ${describe(error)}`);
      return {};
    }
    const remaining = refreshed.metadata?.annotations?.[DEVICES_TO_ALLOCATE] ?? '';
    if (this.vendorWords.some((word) => remaining.includes(word))) return {};
    return this.finishAllocation(node, pod, BIND_PHASE_SUCCESS);
  }

  private podAllocationFailed(
    node: string,
    pod: V1Pod,
  ): Promise<Pick<AllocateRecordFields, 'bindPhase' | 'lockRelease'>> {
    return this.finishAllocation(node, pod, BIND_PHASE_FAILED);
  }

  /** Patch bind-phase, then ReleaseNodeLock with the owner check; HAMi only logs either failing. */
  private async finishAllocation(
    node: string,
    pod: V1Pod,
    phase: 'success' | 'failed',
  ): Promise<Pick<AllocateRecordFields, 'bindPhase' | 'lockRelease'>> {
    const { namespace, name } = identityOf(pod);
    let bindPhase: 'success' | 'failed' | undefined;
    try {
      await this.api.patchPodAnnotations(namespace, name, { [BIND_PHASE]: phase });
      bindPhase = phase;
    } catch (error) {
      this.options.log?.(`patching ${BIND_PHASE}=${phase} on ${namespace}/${name} failed: ${describe(error)}`);
    }
    let lockRelease: ReleaseOutcome | 'error';
    try {
      lockRelease = await releaseNodeLock(
        this.api,
        node,
        { namespace, name },
        { sleep: this.sleep, random: this.random },
      );
    } catch (error) {
      lockRelease = 'error';
      this.options.log?.(`releasing the lock on ${node} for ${namespace}/${name} failed: ${describe(error)}`);
    }
    return { ...(bindPhase === undefined ? {} : { bindPhase }), lockRelease };
  }
}
