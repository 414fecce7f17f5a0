/**
 * A stand-in for HAMi's NVIDIA device plugin (v2.10), written from the wire contract
 * (../shared/reference/hami-wire-contract.md §1.5, §4.6, §5) and sharing no code with src/.
 *
 * kubelet calls Allocate for one container of the pod it is admitting, and the call carries no pod
 * identity. Like HAMi, the stand-in then works out "the pod being allocated" from the node lock
 * (GetPendingPod), which may be a different pod from the one kubelet admits. Every call leaves an
 * AllocateRecord saying which pod kubelet admitted and whose devices it got: `admitted` vs
 * `resolvedTo` is what the invariant "no pod is admitted with devices assigned to another pod"
 * checks.
 *
 * Per call, as HAMi's Allocate (§5):
 * 1. GetPendingPod; failure → error, no annotation change, lock kept;
 * 2. decode the pod's hami.io/vgpu-devices-to-allocate (missing → `device request not found`);
 * 3. the first non-empty piece is this container's; its device count must equal kubelet's request;
 * 4. patch the annotation with that piece blanked (by pod name, no UID);
 * 5. re-read the pod: nothing NVIDIA left → bind-phase=success, ReleaseNodeLock (owner-checked);
 * 6. any failure after step 1 → bind-phase=failed, ReleaseNodeLock (owner-checked), error.
 * Calls on one node are serialised, as HAMi's plugin-wide mutex does.
 */
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { decodeRegisteredGpus, replicaIds } from './device-inventory.js';
import { releaseNodeLock, type ReleaseOutcome } from './node-lock.js';
import { getPendingPod } from './pending-pod.js';
import type { PluginApi } from './plugin-api.js';
import { decodePodDevices, encodePodDevices, eraseNextDeviceRequest, nextDeviceRequest, type HamiDevice } from './pod-devices.js';
import { BIND_PHASE, BIND_PHASE_FAILED, BIND_PHASE_SUCCESS, DEFAULT_VENDOR_WORDS, DEVICES_TO_ALLOCATE, NODE_REGISTER } from './wire.js';

export interface PodIdentity {
  namespace: string;
  name: string;
  uid: string;
}

/** One kubelet Allocate call: one container of the pod kubelet is admitting. */
export interface AllocateRequest {
  node: string;
  /** The pod kubelet admits. The real RPC does not carry it; the stand-in only records it. */
  admitted: PodIdentity;
  /** The admitted pod's container kubelet allocates for. Recorded only. */
  container: string;
  /** The replica IDs kubelet picked (`<UUID>-<i>`); HAMi only checks their number. */
  deviceIds: readonly string[];
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

export interface AllocateRecord {
  /** Order of the record among all records of this plugin. */
  seq: number;
  /** When the call answered (for a `stalled` record: when the stall began). */
  at: Date;
  node: string;
  admitted: PodIdentity;
  /** The admitted pod's container (kubelet's view). */
  container: string;
  deviceIds: readonly string[];
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

export interface AllocateResponse {
  /** The container environment HAMi returns (NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_MEMORY_LIMIT_<i>, CUDA_DEVICE_SM_LIMIT). */
  envs: Record<string, string>;
  devices: HamiDevice[];
  record: AllocateRecord;
}

/** The error an Allocate answers with; kubelet sees `rpc error: code = <code> desc = <message>`. */
export class AllocateError extends Error {
  constructor(message: string, readonly code: 'Unknown' | 'Unavailable' = 'Unknown', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AllocateError';
  }
}

/** The plugin was stopped while a call waited or stalled, or a call came after stop(). */
export class PluginStoppedError extends AllocateError {
  constructor() {
    super('device plugin stopped', 'Unavailable');
    this.name = 'PluginStoppedError';
  }
}

export interface HamiDevicePluginOptions {
  api: PluginApi;
  /** HAMi's list fallback when the lock names no pod (default false: no lock → the call fails). */
  fallback?: boolean;
  /** Time each call takes before it looks anything up (kubelet → plugin latency); default 0. */
  delayMs?: number | ((request: AllocateRequest) => number);
  /** Per call; default: allocate. */
  behaviour?: (request: AllocateRequest) => AllocateAction;
  /** Backend words that mean "more to allocate" (default ['NVIDIA']). */
  vendorWords?: readonly string[];
  /** Called with every record as it is made. */
  onRecord?: (record: AllocateRecord) => void;
  log?: (line: string) => void;
  clock?: () => Date;
  sleep?: (ms: number) => Promise<void>;
  /** For ReleaseNodeLock's retry jitter; default a constant 0.5, so runs replay. */
  random?: () => number;
}

/** The parts of a record a call fills in as it goes. */
type RecordDetail = Partial<Pick<AllocateRecord, 'resolvedTo' | 'via' | 'lock' | 'devices' | 'segment' | 'resolvedContainer' | 'bindPhase' | 'lockRelease' | 'error'>>;

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

/** What getAllocateResponse puts in the environment that tests can check (§5 step 3). */
function environmentOf(devices: readonly HamiDevice[]): Record<string, string> {
  const envs: Record<string, string> = { NVIDIA_VISIBLE_DEVICES: devices.map((device) => device.uuid).join(',') };
  devices.forEach((device, index) => { envs[`CUDA_DEVICE_MEMORY_LIMIT_${index}`] = `${device.usedMem}m`; });
  if (devices[0] !== undefined) envs.CUDA_DEVICE_SM_LIMIT = String(devices[0].usedCores);
  return envs;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Thrown inside a call to end it with a record already made. */
class Answered extends Error {
  constructor(readonly error: AllocateError) {
    super(error.message);
  }
}

export class HamiDevicePlugin {
  private readonly api: PluginApi;
  private readonly clock: () => Date;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly vendorWords: readonly string[];
  private readonly tails = new Map<string, Promise<unknown>>();
  private readonly stalls = new Set<{ reject: (error: Error) => void; timer: NodeJS.Timeout | undefined }>();
  private readonly history: AllocateRecord[] = [];
  /** Nodes whose plugin process is down (stopReporting): no ListAndWatch devices, no Allocate. */
  private readonly silenced = new Set<string>();
  private readonly reportingListeners = new Set<(node: string, reporting: boolean) => void>();
  private stopped = false;

  constructor(private readonly options: HamiDevicePluginOptions) {
    this.api = options.api;
    this.clock = options.clock ?? (() => new Date());
    this.sleep = options.sleep ?? realSleep;
    this.random = options.random ?? (() => 0.5);
    this.vendorWords = options.vendorWords ?? DEFAULT_VENDOR_WORDS;
  }

  /** Every record so far, in order. */
  get records(): readonly AllocateRecord[] {
    return this.history;
  }

  /** Allocations where kubelet's pod got another pod's devices (a different UID): invariant 7 broken. */
  foreignAllocations(): AllocateRecord[] {
    return this.history.filter((record) => record.outcome === 'allocated' && record.resolvedTo?.uid !== record.admitted.uid);
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
    return () => { this.reportingListeners.delete(listener); };
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

  /** kubelet's Allocate for one container; rejects with AllocateError as HAMi answers an error. */
  allocate(request: AllocateRequest): Promise<AllocateResponse> {
    if (this.stopped) return Promise.reject(new PluginStoppedError());
    if (this.silenced.has(request.node)) {
      // kubelet finds no endpoint for the resource: the call never reaches a plugin.
      return Promise.reject(this.fail(request, new AllocateError(`device plugin on ${request.node} is not running`, 'Unavailable')).error);
    }
    const previous = this.tails.get(request.node) ?? Promise.resolve();
    const call = previous.then(() => {
      if (this.stopped) throw new PluginStoppedError();
      return this.allocateInTurn(request);
    });
    const tail = call.catch(() => undefined);
    this.tails.set(request.node, tail);
    void tail.then(() => { if (this.tails.get(request.node) === tail) this.tails.delete(request.node); });
    return call.catch((error: unknown) => { throw error instanceof Answered ? error.error : error; });
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

  private record(request: AllocateRequest, outcome: AllocateRecord['outcome'], detail: RecordDetail = {}): AllocateRecord {
    const record: AllocateRecord = {
      seq: this.history.length + 1, at: this.clock(), node: request.node, admitted: request.admitted,
      container: request.container, deviceIds: request.deviceIds, outcome, ...detail, devices: detail.devices ?? [],
    };
    this.history.push(record);
    try {
      this.options.onRecord?.(record);
    } catch {
      // An observer must not change what the plugin answers.
    }
    return record;
  }

  private fail(request: AllocateRequest, error: AllocateError, detail: RecordDetail = {}): Answered {
    this.record(request, 'failed', { ...detail, error: error.message });
    this.options.log?.(`Allocate on ${request.node} for ${request.admitted.namespace}/${request.admitted.name}/${request.container} failed: ${error.message}`);
    return new Answered(error);
  }

  private async allocateInTurn(request: AllocateRequest): Promise<AllocateResponse> {
    const action = this.options.behaviour?.(request) ?? { kind: 'allocate' };
    if (action.kind === 'stall') return this.stall(request, action.forMs);
    if (action.kind === 'fail' && action.stage === 'before-lookup') {
      throw this.fail(request, new AllocateError(action.message ?? 'simulated Allocate failure'));
    }
    const delay = typeof this.options.delayMs === 'function' ? this.options.delayMs(request) : this.options.delayMs ?? 0;
    if (delay > 0) await this.sleep(delay);

    let pending;
    try {
      pending = await getPendingPod(this.api, request.node, { fallback: this.options.fallback === true });
    } catch (error) {
      throw this.fail(request, new AllocateError(describe(error), 'Unknown', { cause: error }));
    }
    const pod = pending.pod;
    const resolved = { resolvedTo: identityOf(pod), via: pending.via, ...(pending.lock === undefined ? {} : { lock: pending.lock }) };
    const failAllocation = async (message: string, cause?: unknown): Promise<Answered> => {
      const after = await this.podAllocationFailed(request.node, pod);
      return this.fail(request, new AllocateError(message, 'Unknown', { cause }), { ...resolved, ...after });
    };
    if (action.kind === 'fail') throw await failAllocation(action.message ?? 'simulated Allocate failure');

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
      throw this.fail(request, new AllocateError(`runtime error: index out of range [${next.index}] with length ${containers.length}`), { ...resolved, segment: next.index });
    }
    const position = { segment: next.index, resolvedContainer };
    if (next.devices.length !== request.deviceIds.length) throw await failAllocation('device number not matched');
    if (action.afterLookupDelayMs !== undefined) await this.sleep(action.afterLookupDelayMs);
    try {
      await this.api.patchPodAnnotations(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '', { [DEVICES_TO_ALLOCATE]: encodePodDevices(eraseNextDeviceRequest(entries)) });
    } catch (error) {
      throw await failAllocation(`failed to patch ${DEVICES_TO_ALLOCATE}: ${describe(error)}`, error);
    }
    const after = await this.podAllocationTrySuccess(request.node, pod);
    const record = this.record(request, 'allocated', { ...resolved, ...position, ...after, devices: next.devices });
    return { envs: environmentOf(next.devices), devices: next.devices, record };
  }

  private stall(request: AllocateRequest, forMs: number | undefined): Promise<never> {
    this.record(request, 'stalled');
    return new Promise<never>((_resolve, reject) => {
      const stall: { reject: (error: Error) => void; timer: NodeJS.Timeout | undefined } = { reject, timer: undefined };
      if (forMs !== undefined) {
        stall.timer = setTimeout(() => {
          this.stalls.delete(stall);
          reject(this.fail(request, new AllocateError('error reading from server: EOF (device plugin restarted)', 'Unavailable')));
        }, forMs);
      }
      this.stalls.add(stall);
    });
  }

  /** §5 step 5: done only when no backend word is left in the re-read annotation. */
  private async podAllocationTrySuccess(node: string, pod: V1Pod): Promise<Pick<AllocateRecord, 'bindPhase' | 'lockRelease'>> {
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

  private podAllocationFailed(node: string, pod: V1Pod): Promise<Pick<AllocateRecord, 'bindPhase' | 'lockRelease'>> {
    return this.finishAllocation(node, pod, BIND_PHASE_FAILED);
  }

  /** Patch bind-phase, then ReleaseNodeLock with the owner check; HAMi only logs either failing. */
  private async finishAllocation(node: string, pod: V1Pod, phase: 'success' | 'failed'): Promise<Pick<AllocateRecord, 'bindPhase' | 'lockRelease'>> {
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
      lockRelease = await releaseNodeLock(this.api, node, { namespace, name }, { sleep: this.sleep, random: this.random });
    } catch (error) {
      lockRelease = 'error';
      this.options.log?.(`releasing the lock on ${node} for ${namespace}/${name} failed: ${describe(error)}`);
    }
    return { ...(bindPhase === undefined ? {} : { bindPhase }), lockRelease };
  }
}
