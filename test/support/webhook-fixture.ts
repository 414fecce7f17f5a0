import { request } from 'node:https';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { PodAdmissionHandler } from '../../src/admission/pod-admission-handler.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import type { ControlPlane } from '../../src/local/control-plane.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { HttpsListener } from '../../src/server/https-listener.js';
import { createWebhookApp } from '../../src/server/webhook-app.js';
import { createCertificateAuthority, issueCertificate } from '../../src/tls/certificates.js';
import { eventually, notYet } from './test-cluster.js';

export const WEBHOOK_NAMESPACE_LABEL = 'vgpu-warden.test/webhook';
const MANIFEST = resolve(import.meta.dirname, '..', '..', 'manifests', 'webhook.yaml');

/**
 * The real webhook (handler, express app, TLS listener, NodeLocks on the real apiserver) on a
 * loopback port, registered with the apiserver by url + caBundle. Only namespaces carrying this
 * fixture's label are sent to it, so other test files are unaffected.
 */
export class WebhookFixture {
  readonly selectorValue = randomBytes(4).toString('hex');
  readonly configName = `vgpu-warden-test-${this.selectorValue}`;
  caPem = '';
  /** Every request the apiserver sent us, as "OPERATION namespace/name". */
  readonly seen: string[] = [];
  listener: HttpsListener | undefined;
  private readonly core: CoreV1Api;
  private readonly admission: AdmissionregistrationV1Api;

  constructor(private readonly plane: ControlPlane) {
    const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  }

  get url(): string {
    return `https://127.0.0.1:${this.listener?.port ?? 0}/mutate`;
  }

  async start(): Promise<void> {
    await this.serve(
      new PodAdmissionHandler({
        mutation: { schedulerName: 'hami-scheduler', overwriteDefaultScheduler: true, defaultGpuCount: 1 },
        locks: new NodeLocks({
          api: new KubeNodeLockApi(this.core),
          config: { bindGraceMs: 60_000, expireMs: 300_000 },
        }),
        deleteTimeoutMs: 5000,
        onOutcome: (request) => {
          this.seen.push(`${request.operation} ${request.namespace ?? ''}/${request.name ?? ''}`);
        },
      }),
    );
  }

  /** Serves `handler` over TLS on a loopback port (a CA and certificate of its own) and registers it. */
  protected async serve(handler: PodAdmissionHandler): Promise<void> {
    const ca = createCertificateAuthority({ commonName: 'webhook-test-ca', validityDays: 1 });
    const leaf = issueCertificate(ca, {
      commonName: 'vgpu-warden',
      subjectAltNames: ['localhost', '127.0.0.1'],
      usage: 'server',
      validityDays: 1,
    });
    this.caPem = ca.certPem;
    const app = createWebhookApp({ handler, readiness: () => ({ ready: true, reasons: [] }) });
    this.listener = await HttpsListener.start(app, {
      host: '127.0.0.1',
      port: 0,
      certPem: leaf.certPem,
      keyPem: leaf.keyPem,
    });
    await this.admission.createMutatingWebhookConfiguration({ body: this.configuration() });
  }

  /**
   * manifests/webhook.yaml as shipped (rules, selectors, matchConditions, timeouts), pointed at
   * this listener by url and limited to enrolled namespaces. failurePolicy becomes Fail so that a
   * webhook failure shows up as a failed request in the tests.
   */
  configuration(): V1MutatingWebhookConfiguration {
    const shipped = loadYaml<V1MutatingWebhookConfiguration>(readFileSync(MANIFEST, 'utf8'));
    return {
      metadata: { name: this.configName },
      webhooks: (shipped.webhooks ?? []).map((webhook) => ({
        ...webhook,
        failurePolicy: 'Fail',
        clientConfig: { url: this.url, caBundle: Buffer.from(this.caPem).toString('base64') },
        namespaceSelector: {
          matchLabels: { [WEBHOOK_NAMESPACE_LABEL]: this.selectorValue },
          matchExpressions: webhook.namespaceSelector?.matchExpressions ?? [],
        },
      })),
    };
  }

  /** Puts `namespace` under this webhook and waits until the apiserver really calls it. */
  async enroll(namespace: string): Promise<void> {
    await this.core.patchNamespace(
      { name: namespace, body: { metadata: { labels: { [WEBHOOK_NAMESPACE_LABEL]: this.selectorValue } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const probe = {
      metadata: { name: 'probe' },
      spec: { containers: [{ name: 'c', image: 'x', resources: { limits: { 'nvidia.com/gpu': '1' } } }] },
    };
    await eventually(
      'the apiserver to call the webhook',
      async () => {
        const created = await this.core.createNamespacedPod({ namespace, body: probe, dryRun: 'All' });
        return created.spec?.schedulerName === 'hami-scheduler'
          ? true
          : notYet(
              `a dry-run pod with schedulerName ${created.spec?.schedulerName ?? 'unset'} (the webhook not called yet)`,
            );
      },
      20_000,
      200,
    );
  }

  async stop(): Promise<void> {
    await this.admission.deleteMutatingWebhookConfiguration({ name: this.configName }).catch(() => undefined);
    await this.listener?.close();
  }

  /** Sends raw bytes straight to /mutate (or another path) and returns status, headers and body. */
  send(
    body: string | Buffer,
    options: { contentType?: string; contentEncoding?: string; method?: string; path?: string } = {},
  ): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = {};
      if (options.contentType !== undefined) headers['content-type'] = options.contentType;
      if (options.contentEncoding !== undefined) headers['content-encoding'] = options.contentEncoding;
      const payload = typeof body === 'string' ? Buffer.from(body) : body;
      headers['content-length'] = payload.length;
      const req = request(
        {
          host: '127.0.0.1',
          port: this.listener?.port,
          path: options.path ?? '/mutate',
          method: options.method ?? 'POST',
          ca: this.caPem,
          headers,
        },
        (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => {
            text += chunk.toString();
          });
          res.on('end', () => {
            resolve({ status: res.statusCode ?? 0, body: text });
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }
}
