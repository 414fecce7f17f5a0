/**
 * The stand-in on kubelet's real device-plugin API. The test plays kubelet's side from the v1beta1
 * contract (the vendored api.proto, loaded here with its own proto-loader and grpc-js calls): a
 * Registration server on a temporary kubelet.sock, then calls on the plugin's socket as kubelet's
 * device manager makes them. Waits are event-driven with deadlines.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Client,
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  status,
  type ClientReadableStream,
  type MethodDefinition,
  type ServerUnaryCall,
  type sendUnaryData,
  type ServiceDefinition,
  type ServiceError,
} from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import {
  GrpcDevicePluginServer,
  HamiDevicePlugin,
  MemoryPluginApi,
  wire,
  type Admission,
  type GrpcDevicePluginServerOptions,
  type GrpcPluginEvent,
  type HamiDevicePluginOptions,
} from '../../src/hami-plugin/index.js';

// kubelet's view of the contract, typed from api.proto (field names as in the proto).
interface RegisterRequest {
  version: string;
  endpoint: string;
  resource_name: string;
  options: { pre_start_required: boolean; get_preferred_allocation_available: boolean } | null;
}
interface Device {
  ID: string;
  health: string;
}
interface ListAndWatchResponse {
  devices: Device[];
}
interface ContainerAllocateResponse {
  envs: Record<string, string>;
  mounts: unknown[];
  devices: unknown[];
}
interface AllocateResponse {
  container_responses: ContainerAllocateResponse[];
}
interface PreferredAllocationResponse {
  container_responses: { deviceIDs: string[] }[];
}

const PROTO = fileURLToPath(new URL('../../src/hami-plugin/proto/api.proto', import.meta.url));
const protoPackage = loadSync(PROTO, {
  keepCase: true,
  defaults: true,
  arrays: true,
  objects: true,
  longs: String,
  enums: String,
  oneofs: true,
});

function service(name: string): ServiceDefinition {
  const found = protoPackage[`v1beta1.${name}`];
  if (found === undefined || 'format' in found) throw new Error(`no service v1beta1.${name}`);
  return found;
}

function method<Request, Response>(serviceName: string, name: string): MethodDefinition<Request, Response> {
  const found = service(serviceName)[name];
  if (found === undefined) throw new Error(`no method ${name}`);
  return found as MethodDefinition<Request, Response>;
}

const UUID_A = 'GPU-aaaa1111-2222-3333-4444-555566667777';
const UUID_B = 'GPU-bbbb1111-2222-3333-4444-555566667777';
const gpu = (id: string, healthy = true) => ({
  id,
  count: 10,
  devmem: 40960,
  devcore: 100,
  type: 'NVIDIA-A100-PCIE-40GB',
  mode: 'hami-core',
  ...(healthy ? { health: true } : {}),
});
const REGISTER_ONE = JSON.stringify([gpu(UUID_A)]);
const REGISTER_TWO = JSON.stringify([gpu(UUID_A), gpu(UUID_B, false)]);
const DEADLINE_MS = 2000;

function withDeadline<T>(promise: Promise<T>, what: string, ms = DEADLINE_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
  });
  return Promise.race([promise, timeout]).finally(() => {
    clearTimeout(timer);
  });
}

/** A queue of things that arrive (registrations, stream messages, events), read in order. */
class Arrivals<T> {
  private readonly items: T[] = [];
  private readonly waiters: ((item: T) => void)[] = [];
  readonly all: T[] = [];

  push(item: T): void {
    this.all.push(item);
    const waiter = this.waiters.shift();
    if (waiter === undefined) this.items.push(item);
    else waiter(item);
  }

  next(what: string, ms = DEADLINE_MS): Promise<T> {
    const item = this.items.shift();
    if (item !== undefined) return Promise.resolve(item);
    return withDeadline(
      new Promise<T>((resolve) => {
        this.waiters.push(resolve);
      }),
      what,
      ms,
    );
  }

  /** The next item that satisfies `test`, skipping the others. */
  async nextMatching(test: (item: T) => boolean, what: string, ms = DEADLINE_MS): Promise<T> {
    const until = Date.now() + ms;
    for (;;) {
      const item = await this.next(what, Math.max(1, until - Date.now()));
      if (test(item)) return item;
    }
  }
}

/** kubelet's Registration service on `<dir>/kubelet.sock`. */
class FakeKubelet {
  readonly registrations = new Arrivals<RegisterRequest>();
  /** When each Register arrived (Date.now()). */
  readonly registeredAt: number[] = [];
  /** kubelet's answer to a Register: null accepts it; an error refuses it, as kubelet 1.37 refuses a path it holds. */
  answer: () => ServiceError | null = () => null;
  private server: Server | undefined;

  constructor(readonly dir: string) {}

  get socket(): string {
    return join(this.dir, 'kubelet.sock');
  }

  async start(): Promise<void> {
    const server = new Server();
    server.addService(service('Registration'), {
      Register: (
        call: ServerUnaryCall<RegisterRequest, Record<string, never>>,
        callback: sendUnaryData<Record<string, never>>,
      ) => {
        this.registeredAt.push(Date.now());
        this.registrations.push(call.request);
        const refusal = this.answer();
        if (refusal === null) callback(null, {});
        else callback(refusal);
      },
    });
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(`unix:${this.socket}`, ServerCredentials.createInsecure(), (error) => {
        if (error === null) resolve();
        else reject(error);
      });
    });
    this.server = server;
  }

  /** kubelet going away: its server closed and kubelet.sock removed. */
  async stop(): Promise<void> {
    this.server?.forceShutdown();
    this.server = undefined;
    await rm(this.socket, { force: true });
  }
}

/** kubelet's device manager dialling the plugin's socket. */
class PluginDialer {
  readonly client: Client;

  constructor(socket: string) {
    this.client = new Client(`unix:${socket}`, credentials.createInsecure());
  }

  unary<Response = unknown>(name: string, request: object): Promise<Response> {
    const definition = method<object, Response>('DevicePlugin', name);
    return new Promise<Response>((resolve, reject) => {
      this.client.makeUnaryRequest(
        definition.path,
        definition.requestSerialize,
        definition.responseDeserialize,
        request,
        new Metadata(),
        { deadline: Date.now() + 5000 },
        (error, value) => {
          if (error !== null) reject(error);
          else if (value === undefined) reject(new Error(`${name}: no answer`));
          else resolve(value);
        },
      );
    });
  }

  listAndWatch(): {
    messages: Arrivals<ListAndWatchResponse>;
    ended: Promise<ServiceError | undefined>;
    stream: ClientReadableStream<ListAndWatchResponse>;
  } {
    const definition = method<Record<string, never>, ListAndWatchResponse>('DevicePlugin', 'ListAndWatch');
    const messages = new Arrivals<ListAndWatchResponse>();
    const stream = this.client.makeServerStreamRequest(
      definition.path,
      definition.requestSerialize,
      definition.responseDeserialize,
      {},
      new Metadata(),
      {},
    );
    stream.on('data', (message: ListAndWatchResponse) => {
      messages.push(message);
    });
    const ended = new Promise<ServiceError | undefined>((resolve) => {
      stream.on('error', (error: ServiceError) => {
        resolve(error);
      });
      stream.on('end', () => {
        resolve(undefined);
      });
    });
    return { messages, ended, stream };
  }

  close(): void {
    this.client.close();
  }
}

function lockedPod(name: string, toAllocate: string): V1Pod {
  return {
    metadata: {
      namespace: 'ml',
      name,
      annotations: {
        [wire.VGPU_NODE]: 'gpu-1',
        [wire.BIND_TIME]: '1787293240',
        [wire.BIND_PHASE]: 'allocating',
        [wire.DEVICES_TO_ALLOCATE]: toAllocate,
      },
    },
    spec: { nodeName: 'gpu-1', containers: [{ name: 'main', image: 'x' }] },
    status: { phase: 'Pending' },
  };
}

const replicas = (uuid: string, count = 10) => Array.from({ length: count }, (_, index) => `${uuid}-${index}`);

describe("HAMi stand-in on kubelet's device-plugin gRPC API (v1beta1)", function () {
  this.timeout(5000);
  let dir: string;
  let api: MemoryPluginApi;
  let plugin: HamiDevicePlugin<Admission>;
  let kubelet: FakeKubelet;
  let servers: GrpcDevicePluginServer[];
  let dialers: PluginDialer[];
  let events: Arrivals<GrpcPluginEvent>;

  const newPlugin = (options: Partial<HamiDevicePluginOptions<Admission>> = {}) =>
    new HamiDevicePlugin<Admission>({ api, sleep: () => Promise.resolve(), cacheId: () => 'cache-1', ...options });
  const newServer = (options: Partial<GrpcDevicePluginServerOptions> = {}) => {
    const server = new GrpcDevicePluginServer({
      plugin,
      node: 'gpu-1',
      pluginDir: dir,
      pollMs: 50,
      retryMs: 50,
      checkMs: 200,
      onEvent: (event) => {
        events.push(event);
      },
      ...options,
    });
    servers.push(server);
    return server;
  };
  const dial = (server: GrpcDevicePluginServer) => {
    const dialer = new PluginDialer(server.socketPath);
    dialers.push(dialer);
    return dialer;
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gdp-'));
    api = new MemoryPluginApi();
    api.addNode('gpu-1', { [wire.NODE_REGISTER]: REGISTER_ONE });
    plugin = newPlugin();
    kubelet = new FakeKubelet(dir);
    servers = [];
    dialers = [];
    events = new Arrivals();
  });

  afterEach(async () => {
    for (const dialer of dialers) dialer.close();
    await Promise.all(servers.map((server) => server.stop()));
    await kubelet.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("registers as HAMi does, then answers options and streams the node's replicas, again when the inventory changes", async () => {
    await kubelet.start();
    const server = newServer();
    await server.start();
    const registration = await kubelet.registrations.next('Register');
    expect(registration).to.deep.equal({
      version: 'v1beta1',
      endpoint: 'nvidia-gpu.sock',
      resource_name: 'nvidia.com/gpu',
      options: { pre_start_required: false, get_preferred_allocation_available: true },
    });
    expect(server.socketPath).to.equal(join(dir, 'nvidia-gpu.sock'));

    const kubeletSide = dial(server);
    expect(await kubeletSide.unary('GetDevicePluginOptions', {})).to.deep.equal({
      pre_start_required: false,
      get_preferred_allocation_available: true,
    });
    const { messages } = kubeletSide.listAndWatch();
    const first = await messages.next('the first ListAndWatch message');
    expect(first.devices.map((device) => device.ID)).to.deep.equal(replicas(UUID_A));
    expect(first.devices.every((device) => device.health === 'Healthy')).to.equal(true);

    // A second GPU, unhealthy: listed with its health, as HAMi lists it (capacity counts it, allocatable not).
    api.annotateNode('gpu-1', { [wire.NODE_REGISTER]: REGISTER_TWO });
    const second = await messages.next('ListAndWatch after the inventory changed');
    expect(second.devices.map((device) => device.ID)).to.deep.equal([...replicas(UUID_A), ...replicas(UUID_B)]);
    expect(second.devices.filter((device) => device.health === 'Unhealthy').map((device) => device.ID)).to.deep.equal(
      replicas(UUID_B),
    );
    expect(server.rpcs).to.deep.equal(['GetDevicePluginOptions', 'ListAndWatch']);
  });

  it('keeps trying to register until kubelet.sock appears; registerTwice registers twice, neverRegister never', async () => {
    const server = newServer({ registerTwice: true });
    await server.start();
    expect(existsSync(server.socketPath), 'serves before kubelet is there').to.equal(true);
    await kubelet.start();
    await kubelet.registrations.next('the first Register');
    const again = await kubelet.registrations.next('the second Register');
    expect(again.endpoint).to.equal('nvidia-gpu.sock');
    await server.waitForRegistrations(2, { timeoutMs: DEADLINE_MS });
    await server.stop();

    const silent = newServer({ neverRegister: true });
    await silent.start();
    expect(await dial(silent).unary('GetDevicePluginOptions', {})).to.deep.include({ pre_start_required: false });
    expect(
      events.all.filter((event) => event.kind === 'register-failed'),
      'not even tried',
    ).to.deep.equal([]);
    expect(silent.registrations).to.equal(0);
    expect(kubelet.registrations.all).to.have.length(2);
  });

  it("Allocate for the pod the lock names: HAMi's env, annotation consumed, bind-phase success, lock released", async () => {
    api.annotateNode('gpu-1', { [wire.NODE_REGISTER]: JSON.stringify([gpu(UUID_A), gpu(UUID_B)]) });
    api.addPod(lockedPod('train-0', `${UUID_B},NVIDIA,3000,30:;`));
    api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,train-0');
    await kubelet.start();
    const server = newServer();
    await server.start();
    await kubelet.registrations.next('Register');
    const kubeletSide = dial(server);

    // kubelet asks for a preference: the annotated GPU's replicas win over the first available.
    const available = [...replicas(UUID_A), ...replicas(UUID_B)];
    const preferred = await kubeletSide.unary<PreferredAllocationResponse>('GetPreferredAllocation', {
      container_requests: [{ available_deviceIDs: available, must_include_deviceIDs: [], allocation_size: 1 }],
    });
    expect(preferred.container_responses).to.deep.equal([{ deviceIDs: [`${UUID_B}-0`] }]);

    const answer = await kubeletSide.unary<AllocateResponse>('Allocate', {
      container_requests: [{ devices_ids: [`${UUID_B}-0`] }],
    });
    expect(answer.container_responses).to.have.length(1);
    const envs = {
      NVIDIA_VISIBLE_DEVICES: UUID_B,
      CUDA_DEVICE_MEMORY_LIMIT_0: '3000m',
      CUDA_DEVICE_SM_LIMIT: '30',
      CUDA_DEVICE_MEMORY_SHARED_CACHE: '/usr/local/vgpu/cache-1.cache',
      LIBCUDA_LOG_LEVEL: '1',
    };
    expect(answer.container_responses[0]).to.deep.include({ envs, mounts: [], devices: [] });
    expect(api.pod('ml', 'train-0')?.metadata?.annotations).to.deep.include({
      [wire.DEVICES_TO_ALLOCATE]: ';;',
      [wire.BIND_PHASE]: 'success',
    });
    expect(api.lock('gpu-1')).to.equal(undefined);
    expect(await kubeletSide.unary('PreStartContainer', { devices_ids: [`${UUID_B}-0`] })).to.deep.equal({});

    expect(plugin.records).to.have.length(1);
    const record = plugin.records[0];
    expect(record).to.deep.include({
      outcome: 'allocated',
      transport: 'grpc',
      deviceIds: [`${UUID_B}-0`],
      envs,
      bindPhase: 'success',
      lockRelease: 'released',
    });
    expect(record?.resolvedTo?.name).to.equal('train-0');
    expect(record).not.to.have.property('admitted');
    expect(plugin.foreignAllocations(), 'no admitted pod to judge').to.deep.equal([]);
    expect(server.rpcs).to.deep.equal(['GetPreferredAllocation', 'Allocate', 'PreStartContainer']);
  });

  it('Allocate while the lock names a pod that is gone: a gRPC error saying not found, lock untouched', async () => {
    const lock = '2026-08-21T06:20:40Z,ml,gone';
    api.setLock('gpu-1', lock);
    await kubelet.start();
    const server = newServer();
    await server.start();
    const error = await dial(server)
      .unary('Allocate', { container_requests: [{ devices_ids: [`${UUID_A}-0`] }] })
      .then(
        () => undefined,
        (caught: unknown) => caught as ServiceError,
      );
    expect(error?.code).to.equal(status.UNKNOWN);
    expect(error?.details).to.contain('not found');
    expect(api.lock('gpu-1')).to.equal(lock);
    expect(plugin.records.map((record) => [record.outcome, record.transport])).to.deep.equal([['failed', 'grpc']]);
  });

  it('re-serves and re-registers at once when kubelet restarts (its socket deleted, kubelet.sock recreated)', async () => {
    await kubelet.start();
    const server = newServer();
    await server.start();
    await kubelet.registrations.next('Register');
    const before = dial(server).listAndWatch();
    await before.messages.next('ListAndWatch before the restart');

    // kubelet restarts: it goes, deletes every socket in the folder, and serves kubelet.sock again.
    await kubelet.stop();
    await rm(server.socketPath, { force: true });
    await kubelet.start();
    const restartedAt = Date.now();
    const again = await kubelet.registrations.next('Register after the kubelet restart');
    const tookMs = Date.now() - restartedAt;
    expect(again.endpoint).to.equal('nvidia-gpu.sock');
    expect(tookMs, 'HAMi re-registers within 0.05 s; kubelet keeps pods if within 1 s').to.be.lessThan(1000);
    expect(existsSync(server.socketPath)).to.equal(true);
    const after = dial(server).listAndWatch();
    expect((await after.messages.next('ListAndWatch after the restart')).devices).to.have.length(10);
    expect(await before.ended, 'the old stream ended with the old server').to.not.equal(undefined);
    expect(server.registrations).to.equal(2);
  });

  it('a kubelet.sock that changes under a live connection: the stream is cut first, and Register comes settleMs later from a new socket', async () => {
    await kubelet.start();
    const server = newServer({ settleMs: 300 });
    await server.start();
    await kubelet.registrations.next('Register');
    const before = dial(server).listAndWatch();
    await before.messages.next('ListAndWatch');
    let streamEndedAt = 0;
    void before.ended.then(() => {
      streamEndedAt = Date.now();
    });

    // kubelet.sock replaced while the plugin's own socket stays (nothing deleted it): a second
    // Register on the live connection is what kubelet 1.37 refuses and then never recovers from.
    await kubelet.stop();
    await kubelet.start();
    await kubelet.registrations.next('Register after kubelet.sock changed');
    expect(streamEndedAt, 'the old stream ended before the new Register').to.be.greaterThan(0);
    const registeredAt = kubelet.registeredAt.at(-1) ?? 0;
    expect(registeredAt - streamEndedAt, 'kubelet had settleMs to drop its client').to.be.at.least(250);
    expect(
      events.all.filter((event) => event.kind === 'serving'),
      'served anew for it',
    ).to.have.length(2);
  });

  it('a refused Register is retried from a freshly served socket (kubelet may hold a client of the old one)', async () => {
    let refusals = 1;
    kubelet.answer = () =>
      refusals-- > 0
        ? Object.assign(new Error('device plugin already connected: nvidia-gpu.sock'), {
            code: status.UNKNOWN,
            details: 'device plugin already connected: nvidia-gpu.sock',
            metadata: new Metadata(),
          })
        : null;
    await kubelet.start();
    const server = newServer();
    await server.start();
    await kubelet.registrations.next('the refused Register');
    await kubelet.registrations.next('the Register after it');
    await server.waitForRegistrations(1, { timeoutMs: DEADLINE_MS });
    const kinds = events.all
      .map((event) => event.kind)
      .filter((kind) => kind === 'serving' || kind === 'registered' || kind === 'register-failed');
    expect(kinds).to.deep.equal(['serving', 'register-failed', 'serving', 'registered']);
    expect(
      server
        .recentLines()
        .some((line) => line.includes('Register with kubelet failed: 2 UNKNOWN: device plugin already connected')),
      'kept for a failure message',
    ).to.equal(true);
  });

  it('stop(): socket gone and a stalled Allocate cut with an error; restart() serves and registers again', async () => {
    plugin = newPlugin({ behaviour: () => (plugin.records.length === 0 ? { kind: 'stall' } : { kind: 'allocate' }) });
    api.addPod(lockedPod('train-0', `${UUID_A},NVIDIA,1000,10:;`));
    api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,train-0');
    await kubelet.start();
    const server = newServer();
    await server.start();
    await kubelet.registrations.next('Register');
    const kubeletSide = dial(server);
    const { ended } = kubeletSide.listAndWatch();
    const stalled = kubeletSide.unary('Allocate', { container_requests: [{ devices_ids: [`${UUID_A}-0`] }] }).then(
      () => undefined,
      (caught: unknown) => caught as ServiceError,
    );
    await events.nextMatching((event) => event.kind === 'rpc' && event.method === 'Allocate', 'the Allocate to arrive');
    expect(plugin.records.map((record) => record.outcome)).to.deep.equal(['stalled']);

    await server.stop();
    expect(existsSync(server.socketPath), 'socket removed').to.equal(false);
    expect((await withDeadline(stalled, 'the stalled Allocate to fail'))?.code, 'kubelet gets an error').to.be.a(
      'number',
    );
    expect(await withDeadline(ended, 'ListAndWatch to end'), "kubelet's ListAndWatch breaks").to.not.equal(undefined);
    expect(plugin.records.map((record) => [record.outcome, record.error])).to.deep.equal([
      ['stalled', undefined],
      ['failed', 'device plugin stopped'],
    ]);
    expect(api.lock('gpu-1'), 'a killed process releases nothing').to.not.equal(undefined);

    const stoppedAt = Date.now();
    await server.restart();
    await kubelet.registrations.next('Register after restart()');
    expect(
      (kubelet.registeredAt.at(-1) ?? 0) - stoppedAt,
      'a restarted process registers only once kubelet had settleMs (default 200) to see its stream end',
    ).to.be.at.least(150);
    const answer = await dial(server).unary<AllocateResponse>('Allocate', {
      container_requests: [{ devices_ids: [`${UUID_A}-0`] }],
    });
    expect(answer.container_responses[0]?.envs.NVIDIA_VISIBLE_DEVICES, "the node's queue is free again").to.equal(
      UUID_A,
    );
    expect(api.lock('gpu-1')).to.equal(undefined);
  });

  it('follows HamiDevicePlugin.stopReporting / reportAgain: the process dies and comes back', async () => {
    await kubelet.start();
    const server = newServer();
    await server.start();
    await kubelet.registrations.next('Register');
    plugin.stopReporting('gpu-1');
    await events.nextMatching((event) => event.kind === 'stopped', 'the server to stop');
    expect(existsSync(server.socketPath)).to.equal(false);
    expect(server.running).to.equal(false);
    plugin.reportAgain('gpu-1');
    await kubelet.registrations.next('Register after reportAgain');
    expect(server.running).to.equal(true);
  });
});
