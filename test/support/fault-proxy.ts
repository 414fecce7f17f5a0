import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type {
  ClientRequest,
  IncomingHttpHeaders,
  IncomingMessage,
  OutgoingHttpHeaders,
  ServerResponse,
} from 'node:http';
import { Agent, createServer, request as httpsRequest, type Server } from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadKubeConfig, type PooledKubeConfig } from '../../src/kube/client.js';
import type { ControlPlane } from '../../src/local/control-plane.js';
import { renderKubeconfig } from '../../src/local/kubeconfig.js';
import {
  createCertificateAuthority,
  issueCertificate,
  type CertificateAuthority,
  type IssuedCertificate,
} from '../../src/tls/certificates.js';

/**
 * A fault-injecting HTTPS proxy on loopback in front of a real kube-apiserver, for integration, e2e
 * and chaos tests. Every request (bodies, all headers including Authorization, chunked answers and
 * long-running watch streams) is forwarded unchanged until a rule added with `addRule` says
 * otherwise: fail with a status, drop the answer after the write committed, delay, hang, reset the
 * connection, or expire a watch. Every request is logged, so tests can also count API calls.
 *
 * Not forwarded: protocol upgrades (exec, attach, port-forward); the tests here never need them.
 */

/** Where the proxy forwards to: a control plane, or any apiserver URL with its CA and a bearer token. */
export interface FaultProxyUpstream {
  url: string;
  caPem: string;
  token: string;
}

export interface FaultProxyOptions {
  upstream: ControlPlane | FaultProxyUpstream;
  /** Where the kubeconfig directory is made; defaults to the OS temp dir. */
  baseDir?: string;
}

/** What a rule (or a log filter) sees of a request. */
export interface RequestInfo {
  method: string;
  /** The path without the query, e.g. /api/v1/namespaces/ns/configmaps. */
  path: string;
  /** The raw query without '?', e.g. watch=true&resourceVersion=12. */
  query: string;
  /** Path and query as the client sent them. */
  url: string;
  /** `?watch=true|1` or a legacy `/watch/` path. */
  watch: boolean;
  headers: IncomingHttpHeaders;
}

/** Every given condition must hold; an empty match matches every request. */
export interface RequestMatch {
  /** One method or several, case-insensitive. */
  method?: string | readonly string[];
  /** Tested against the path without the query. */
  path?: RegExp;
  /** Tested against the raw query string without '?'. */
  query?: RegExp;
  watch?: boolean;
  /** Anything else, e.g. a header. */
  where?: (request: RequestInfo) => boolean;
}

export type FaultAction =
  /** Answer with `status` and `body` (a Status object by default) without forwarding. */
  | { kind: 'fail'; status: number; body?: object; headers?: Record<string, string> }
  /**
   * Forward, wait for the upstream's full answer (the write committed), then destroy the client
   * connection without answering.
   */
  | { kind: 'drop-after-commit' }
  /** Forward after `ms`. */
  | { kind: 'delay'; ms: number }
  /** Never forward nor answer, until the client gives up or the proxy stops. */
  | { kind: 'hang' }
  /**
   * Never answer the client, but forward its request `ms` later whatever the client did meanwhile (it
   * gave up): an apiserver still committing a write whose caller was cut off by its deadline.
   */
  | { kind: 'commit-late'; ms: number }
  /** Destroy the client connection at once without forwarding. */
  | { kind: 'reset' }
  /**
   * Answer a watch with one ERROR event carrying a 410 Expired Status and end the stream (a
   * non-watch request gets a 410 answer).
   */
  | { kind: 'expire-watch' };

export type FaultKind = FaultAction['kind'];

export interface FaultRule {
  match?: RequestMatch;
  action: FaultAction;
  /** How many matching requests the rule applies to; unlimited when absent. */
  times?: number;
}

export interface RuleHandle {
  /** Requests the rule has been applied to so far. */
  readonly hits: number;
  /** True once `times` requests were hit or the rule was removed. */
  readonly spent: boolean;
  remove(): void;
  /** Resolves once the rule has been applied to `count` requests (default 1). */
  whenHit(count?: number): Promise<void>;
}

/**
 * What became of a request: the HTTP status the client got (the upstream's or an injected one),
 * `pending` while no answer has started, `dropped` (drop-after-commit), `reset`, `hung` (a hang:
 * no answer ever), `aborted` (the client went away before an answer started) or `failed` (the
 * upstream broke after the answer started, so the client connection was destroyed).
 */
export type RequestOutcome = number | 'pending' | 'dropped' | 'reset' | 'hung' | 'aborted' | 'failed';

export interface LoggedRequest {
  /** 1-based arrival order over the proxy's life (clearLog does not reset it). */
  seq: number;
  method: string;
  path: string;
  query: string;
  url: string;
  watch: boolean;
  /** The fault applied, if a rule matched. */
  fault: FaultKind | undefined;
  status: RequestOutcome;
  /** The apiserver's status, when the request reached it and it answered. */
  upstreamStatus: number | undefined;
  /** True when the request was sent to the apiserver. */
  forwarded: boolean;
  /** Date.now() at arrival. */
  at: number;
  /** Date.now() when the exchange ended (answer complete, connection dropped or closed). */
  endedAt: number | undefined;
  /** Why the proxy could not complete the exchange, when it could not. */
  error: string | undefined;
}

/** Filters the request log: a RequestMatch plus conditions on what became of the request. */
export interface RequestFilter extends Omit<RequestMatch, 'where'> {
  status?: RequestOutcome | readonly RequestOutcome[];
  /** A fault kind, or null for requests no rule touched. */
  fault?: FaultKind | null;
  forwarded?: boolean;
  where?: (entry: LoggedRequest) => boolean;
}

interface ActiveRule {
  match: RequestMatch;
  action: FaultAction;
  times: number | undefined;
  hits: number;
  removed: boolean;
  waiters: { count: number; resolve: () => void }[];
}

interface OpenWatch {
  res: ServerResponse;
  /** Ends the stream towards the client and abandons the upstream watch. */
  end(mode: 'end' | 'reset'): void;
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
  'expect',
  'host',
]);
const PROXY_USER = 'vgpu-warden-admin';

let servingMaterial: { ca: CertificateAuthority; serving: IssuedCertificate } | undefined;

/** One CA and serving certificate for 127.0.0.1 per process: key generation is the slow part of start(). */
function proxyServingMaterial(): { ca: CertificateAuthority; serving: IssuedCertificate } {
  if (!servingMaterial) {
    const ca = createCertificateAuthority({ commonName: 'vgpu-warden-fault-proxy-ca', validityDays: 7 });
    const serving = issueCertificate(ca, {
      commonName: 'fault-proxy',
      subjectAltNames: ['127.0.0.1', 'localhost'],
      usage: 'server',
      validityDays: 7,
    });
    servingMaterial = { ca, serving };
  }
  return servingMaterial;
}

function isWatchRequest(path: string, query: string): boolean {
  return /(?:^|&)watch=(?:true|1)(?:&|$)/i.test(query) || /^\/(?:api\/[^/]+|apis\/[^/]+\/[^/]+)\/watch\//.test(path);
}

function methodMatches(wanted: string | readonly string[] | undefined, method: string): boolean {
  if (wanted === undefined) return true;
  const list: readonly string[] = typeof wanted === 'string' ? [wanted] : wanted;
  return list.some((one) => one.toUpperCase() === method.toUpperCase());
}

function matches(
  match: Omit<RequestMatch, 'where'>,
  request: Pick<RequestInfo, 'method' | 'path' | 'query' | 'watch'>,
): boolean {
  return (
    methodMatches(match.method, request.method) &&
    (match.path === undefined || testRegExp(match.path, request.path)) &&
    (match.query === undefined || testRegExp(match.query, request.query)) &&
    (match.watch === undefined || match.watch === request.watch)
  );
}

/** RegExp.test without the lastIndex trap of /g and /y expressions. */
function testRegExp(pattern: RegExp, text: string): boolean {
  pattern.lastIndex = 0;
  return pattern.test(text);
}

function statusBody(code: number, reason: string, message: string): object {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Expired',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

function stripHopByHop(headers: IncomingHttpHeaders, alsoDrop: readonly string[] = []): OutgoingHttpHeaders {
  const connectionListed = (headers.connection ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || alsoDrop.includes(name) || connectionListed.includes(name))
      continue;
    out[name] = value;
  }
  return out;
}

const EXPIRED_EVENT = {
  type: 'ERROR',
  object: {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    reason: 'Expired',
    code: 410,
    message: 'too old resource version',
  },
};

export class FaultProxy {
  /** Every request since start (or the last clearLog), in arrival order. */
  readonly requests: LoggedRequest[] = [];

  private readonly rules: ActiveRule[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly upstreamRequests = new Set<ClientRequest>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly hanging = new Set<ServerResponse>();
  private readonly watches = new Set<OpenWatch>();
  private readonly kubeConfigs: PooledKubeConfig[] = [];
  private seq = 0;
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly server: Server,
    private readonly agent: Agent,
    private readonly upstreamUrl: URL,
    /** https://127.0.0.1:<port> */
    readonly url: string,
    /** The CA that signed the proxy's serving certificate (what its kubeconfig trusts). */
    readonly caPem: string,
    private readonly dir: string,
    /** A kubeconfig pointing at the proxy with the upstream's bearer token. */
    readonly kubeconfigPath: string,
  ) {}

  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    const upstream: FaultProxyUpstream =
      'url' in options.upstream
        ? options.upstream
        : { url: options.upstream.server, caPem: options.upstream.caPem, token: options.upstream.token };
    const { ca, serving } = proxyServingMaterial();
    // requestTimeout 0: a hang must last until the client gives up, not until Node's 300 s limit.
    const server = createServer({
      cert: serving.certPem,
      key: serving.keyPem,
      requestTimeout: 0,
      keepAliveTimeout: 30_000,
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: 0 }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address();
    if (address === null || typeof address !== 'object') {
      server.close();
      throw new Error('fault proxy: could not read its listening port');
    }
    const url = `https://127.0.0.1:${address.port}`;
    const dir = mkdtempSync(join(options.baseDir ?? tmpdir(), 'vgpu-warden-fault-proxy-'));
    const kubeconfigPath = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfigPath,
      renderKubeconfig({
        clusterName: 'vgpu-warden-fault-proxy',
        server: url,
        caPem: ca.certPem,
        userName: PROXY_USER,
        token: upstream.token,
      }),
      { mode: 0o600 },
    );
    const agent = new Agent({ ca: upstream.caPem, keepAlive: true });
    const proxy = new FaultProxy(server, agent, new URL(upstream.url), url, ca.certPem, dir, kubeconfigPath);
    server.on('connection', (socket: Socket) => {
      proxy.sockets.add(socket);
      socket.once('close', () => proxy.sockets.delete(socket));
    });
    server.on('clientError', (_error, socket) => {
      socket.destroy();
    });
    server.on('tlsClientError', (_error, socket) => {
      socket.destroy();
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      proxy.handle(req, res);
    });
    return proxy;
  }

  /** A client for the proxy (loaded from kubeconfigPath); stop() closes its connections. */
  kubeConfig(): PooledKubeConfig {
    const kubeConfig = loadKubeConfig(this.kubeconfigPath);
    this.kubeConfigs.push(kubeConfig);
    return kubeConfig;
  }

  /** Adds a rule. Rules are tried in the order they were added; the first live one that matches applies. */
  addRule(rule: FaultRule): RuleHandle {
    const active: ActiveRule = {
      match: rule.match ?? {},
      action: rule.action,
      times: rule.times,
      hits: 0,
      removed: false,
      waiters: [],
    };
    this.rules.push(active);
    return {
      get hits() {
        return active.hits;
      },
      get spent() {
        return active.removed || (active.times !== undefined && active.hits >= active.times);
      },
      remove: () => {
        active.removed = true;
        const index = this.rules.indexOf(active);
        if (index >= 0) this.rules.splice(index, 1);
      },
      whenHit: (count = 1) =>
        active.hits >= count
          ? Promise.resolve()
          : new Promise<void>((resolve) => {
              active.waiters.push({ count, resolve });
            }),
    };
  }

  clearRules(): void {
    for (const rule of this.rules) rule.removed = true;
    this.rules.length = 0;
  }

  /** The logged requests that pass `filter` (all of them without one). */
  requestsWhere(filter: RequestFilter = {}): LoggedRequest[] {
    const statuses =
      filter.status === undefined ? undefined : typeof filter.status === 'object' ? filter.status : [filter.status];
    return this.requests.filter(
      (entry) =>
        matches(filter, entry) &&
        (statuses === undefined || statuses.includes(entry.status)) &&
        (filter.fault === undefined || entry.fault === (filter.fault ?? undefined)) &&
        (filter.forwarded === undefined || entry.forwarded === filter.forwarded) &&
        (filter.where === undefined || filter.where(entry)),
    );
  }

  countRequests(filter: RequestFilter = {}): number {
    return this.requestsWhere(filter).length;
  }

  /** Counts of the logged requests passing `filter` by "METHOD path", e.g. { 'PATCH /api/v1/nodes/n1': 2 }. */
  tally(filter: RequestFilter = {}): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const entry of this.requestsWhere(filter)) {
      const key = `${entry.method} ${entry.path}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return counts;
  }

  clearLog(): void {
    this.requests.length = 0;
  }

  /** Watch streams being forwarded now. */
  get openWatches(): number {
    return this.watches.size;
  }

  /** Requests held by a `hang` rule whose client is still waiting. */
  get hungRequests(): number {
    return this.hanging.size;
  }

  /** Client connections open now. */
  get openConnections(): number {
    return this.sockets.size;
  }

  /**
   * Ends every open watch stream now, as an apiserver does when a watch times out: `end` finishes
   * the response cleanly, `reset` destroys the connection. Returns how many were ended.
   */
  breakWatches(mode: 'end' | 'reset' = 'end'): number {
    const open = [...this.watches];
    for (const watch of open) watch.end(mode);
    return open.length;
  }

  /**
   * Closes the listener, every client and upstream connection (watches and hung requests included),
   * the kubeConfig() clients and the kubeconfig directory. Idempotent.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.clearRules();
      for (const timer of this.timers) clearTimeout(timer);
      this.timers.clear();
      const closed = new Promise<void>((resolve) => {
        this.server.close(() => {
          resolve();
        });
      });
      this.server.closeAllConnections();
      for (const socket of this.sockets) socket.destroy();
      for (const request of this.upstreamRequests) request.destroy();
      await closed;
      this.agent.destroy();
      await Promise.all(this.kubeConfigs.map((kubeConfig) => kubeConfig.close().catch(() => undefined)));
      rmSync(this.dir, { recursive: true, force: true });
    })();
    return this.stopping;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const queryAt = url.indexOf('?');
    const path = queryAt < 0 ? url : url.slice(0, queryAt);
    const query = queryAt < 0 ? '' : url.slice(queryAt + 1);
    const info: RequestInfo = {
      method: req.method ?? 'GET',
      path,
      query,
      url,
      watch: isWatchRequest(path, query),
      headers: req.headers,
    };
    const entry: LoggedRequest = {
      seq: ++this.seq,
      method: info.method,
      path,
      query,
      url,
      watch: info.watch,
      fault: undefined,
      status: 'pending',
      upstreamStatus: undefined,
      forwarded: false,
      at: Date.now(),
      endedAt: undefined,
      error: undefined,
    };
    this.requests.push(entry);
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    res.once('close', () => {
      entry.endedAt ??= Date.now();
      if (entry.status === 'pending') entry.status = 'aborted';
    });
    if (this.stopping) {
      req.socket.destroy();
      entry.status = 'reset';
      return;
    }

    const rule = this.takeRule(info);
    entry.fault = rule?.action.kind;
    const action = rule?.action;
    if (action === undefined) {
      this.forward(req, res, entry, 'answer');
      return;
    }
    switch (action.kind) {
      case 'fail': {
        req.resume();
        const body =
          action.body ??
          statusBody(action.status, REASONS[action.status] ?? 'Unknown', `fault-proxy: injected ${action.status}`);
        entry.status = action.status;
        res.writeHead(action.status, { 'content-type': 'application/json', ...action.headers });
        res.end(JSON.stringify(body));
        return;
      }
      case 'drop-after-commit':
        this.forward(req, res, entry, 'drop');
        return;
      case 'delay': {
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          if (!res.destroyed) this.forward(req, res, entry, 'answer');
        }, action.ms);
        this.timers.add(timer);
        res.once('close', () => {
          clearTimeout(timer);
          this.timers.delete(timer);
        });
        return;
      }
      case 'commit-late': {
        entry.status = 'hung';
        this.hanging.add(res);
        res.once('close', () => this.hanging.delete(res));
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
        });
        req.once('end', () => {
          const timer = setTimeout(() => {
            this.timers.delete(timer);
            this.commitLate(req, Buffer.concat(chunks), entry);
          }, action.ms);
          this.timers.add(timer);
        });
        return;
      }
      case 'hang':
        entry.status = 'hung';
        this.hanging.add(res);
        res.once('close', () => this.hanging.delete(res));
        return;
      case 'reset':
        entry.status = 'reset';
        entry.endedAt = Date.now();
        req.socket.destroy();
        return;
      case 'expire-watch':
        req.resume();
        if (info.watch) {
          entry.status = 200;
          res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
          res.end(JSON.stringify(EXPIRED_EVENT) + '\n');
        } else {
          entry.status = 410;
          res.writeHead(410, { 'content-type': 'application/json' });
          res.end(JSON.stringify(EXPIRED_EVENT.object));
        }
        return;
    }
  }

  private takeRule(info: RequestInfo): ActiveRule | undefined {
    const rule = this.rules.find(
      (candidate) =>
        !candidate.removed &&
        (candidate.times === undefined || candidate.hits < candidate.times) &&
        matches(candidate.match, info) &&
        (candidate.match.where === undefined || candidate.match.where(info)),
    );
    if (!rule) return undefined;
    rule.hits++;
    const due = rule.waiters.filter((waiter) => rule.hits >= waiter.count);
    rule.waiters = rule.waiters.filter((waiter) => rule.hits < waiter.count);
    for (const waiter of due) waiter.resolve();
    return rule;
  }

  /**
   * Sends the request upstream; `drop` reads the whole answer and then destroys the client
   * connection instead of answering.
   */
  /** Sends a request the client has given up on to the upstream, and records its answer only. */
  private commitLate(req: IncomingMessage, body: Buffer, entry: LoggedRequest): void {
    const upstreamReq = httpsRequest({
      protocol: 'https:',
      hostname: this.upstreamUrl.hostname,
      port: this.upstreamUrl.port,
      method: req.method,
      path: req.url,
      headers: { ...stripHopByHop(req.headers), host: this.upstreamUrl.host, 'content-length': String(body.length) },
      agent: this.agent,
    });
    entry.forwarded = true;
    this.upstreamRequests.add(upstreamReq);
    upstreamReq.once('close', () => this.upstreamRequests.delete(upstreamReq));
    upstreamReq.on('response', (upstreamRes: IncomingMessage) => {
      entry.upstreamStatus = upstreamRes.statusCode;
      upstreamRes.resume();
      upstreamRes.once('end', () => {
        entry.endedAt = Date.now();
      });
    });
    upstreamReq.once('error', (error: Error) => {
      entry.error = error.message;
    });
    upstreamReq.end(body);
  }

  private forward(req: IncomingMessage, res: ServerResponse, entry: LoggedRequest, mode: 'answer' | 'drop'): void {
    const upstreamReq = httpsRequest({
      protocol: 'https:',
      hostname: this.upstreamUrl.hostname,
      port: this.upstreamUrl.port,
      method: req.method,
      path: req.url,
      headers: { ...stripHopByHop(req.headers), host: this.upstreamUrl.host },
      agent: this.agent,
    });
    entry.forwarded = true;
    this.upstreamRequests.add(upstreamReq);
    upstreamReq.once('close', () => this.upstreamRequests.delete(upstreamReq));
    // The client went away (or was cut off) before the exchange finished: abandon the upstream side too.
    res.once('close', () => {
      if (mode === 'answer' && !res.writableFinished) upstreamReq.destroy();
    });
    let watch: OpenWatch | undefined;
    // Set when breakWatches ended the stream on purpose: the upstream errors that follow are expected.
    let ended = false;

    upstreamReq.on('response', (upstreamRes: IncomingMessage) => {
      entry.upstreamStatus = upstreamRes.statusCode;
      if (mode === 'drop') {
        upstreamRes.resume();
        upstreamRes.once('end', () => {
          entry.status = 'dropped';
          entry.endedAt = Date.now();
          req.socket.destroy();
        });
        upstreamRes.once('error', (error: Error) => {
          entry.status = 'dropped';
          entry.error = error.message;
          req.socket.destroy();
        });
        return;
      }
      if (res.destroyed) {
        upstreamReq.destroy();
        return;
      }
      entry.status = upstreamRes.statusCode ?? 502;
      res.writeHead(entry.status, upstreamRes.statusMessage, stripHopByHop(upstreamRes.headers, ['transfer-encoding']));
      // Watch clients wait for the headers before any event arrives.
      res.flushHeaders();
      if (entry.watch) {
        const open: OpenWatch = {
          res,
          end: (how) => {
            ended = true;
            this.watches.delete(open);
            upstreamRes.unpipe(res);
            if (how === 'reset') req.socket.destroy();
            else res.end();
            upstreamReq.destroy();
          },
        };
        watch = open;
        this.watches.add(open);
      }
      upstreamRes.once('error', (error: Error) => {
        if (ended) return;
        entry.status = 'failed';
        entry.error = error.message;
        res.destroy();
      });
      upstreamRes.once('close', () => {
        if (ended || upstreamRes.complete) return;
        entry.status = 'failed';
        entry.error ??= 'the upstream connection closed before the answer was complete';
        res.destroy();
      });
      upstreamRes.pipe(res);
    });

    upstreamReq.once('error', (error: Error) => {
      if (ended) return;
      entry.error = error.message;
      if (watch) this.watches.delete(watch);
      if (res.headersSent || res.destroyed || mode === 'drop') {
        if (entry.status === 'pending') entry.status = 'failed';
        if (!res.writableFinished) res.destroy();
        return;
      }
      entry.status = 502;
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(statusBody(502, 'InternalError', `fault-proxy: upstream request failed: ${error.message}`)),
      );
    });
    res.once('close', () => {
      if (watch) this.watches.delete(watch);
    });

    req.pipe(upstreamReq);
  }
}
