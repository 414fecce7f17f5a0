import type express from 'express';
import type { Config } from '../config/setting-spec.js';
import type { Lifecycle } from '../lifecycle/lifecycle.js';
import { listenFailure, type ListenerSettings } from '../lifecycle/listen-failure.js';
import type { ReadinessState } from '../lifecycle/readiness.js';
import { HttpsListener } from '../server/https-listener.js';
import { startMetricsListener, type MetricsListener } from '../server/metrics-app.js';
import type { Logger } from '../telemetry/logger.js';
import type { WardenMetrics } from '../telemetry/metrics.js';
import type { Certificates, ServingListeners } from './certificates.js';

export interface OpenListeners {
  webhook: HttpsListener;
  extender: HttpsListener;
  metrics: MetricsListener;
}

function listenerSettings(
  role: string,
  prefix: 'WEBHOOK' | 'EXTENDER' | 'METRICS',
  host: string,
  port: number,
): ListenerSettings {
  return { role, host, port, hostSetting: `${prefix}_HOST`, portSetting: `${prefix}_PORT` };
}

/** Binds one listener; a bind error becomes the one-line StartupError naming the address and the setting. */
async function listen<T>(settings: ListenerSettings, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    throw listenFailure(settings, error);
  }
}

/**
 * Binds the webhook, the extender and the metrics listener, in that order, each entered into
 * `listening` as it answers (the keeper hands them renewed certificates). They stop together:
 * each stops accepting at once and drains within the bound.
 */
export async function openListeners(
  config: Config,
  log: Logger,
  lifecycle: Lifecycle,
  parts: {
    apps: { webhook: express.Express; extender: express.Express };
    certificates: Pick<Certificates, 'material' | 'clientCerts'>;
    metrics: WardenMetrics;
    ready: () => ReadinessState;
    listening: ServingListeners;
  },
): Promise<OpenListeners> {
  const { apps, listening, certificates } = parts;
  const { material, clientCerts } = certificates;
  const opened: { close(forceAfterMs: number): Promise<void> }[] = [];
  lifecycle.defer('listeners', (remainingMs) => Promise.all(opened.map((listener) => listener.close(remainingMs))));
  lifecycle.checkpoint();
  const tls = { certPem: material.certPem, keyPem: material.keyPem };
  const { webhookHost, webhookPort, extenderHost, extenderPort, metricsHost, metricsPort } = config;
  const webhook = await listen(listenerSettings('the webhook', 'WEBHOOK', webhookHost, webhookPort), () =>
    HttpsListener.start(apps.webhook, { host: webhookHost, port: webhookPort, ...tls }),
  );
  opened.push(webhook);
  listening.webhook = webhook;
  const clientCa = clientCerts ? { clientCaPem: material.caBundlePem } : {};
  const extender = await listen(listenerSettings('the extender', 'EXTENDER', extenderHost, extenderPort), () =>
    HttpsListener.start(apps.extender, { host: extenderHost, port: extenderPort, ...tls, ...clientCa }),
  );
  opened.push(extender);
  listening.extender = extender;
  if (clientCerts) {
    // Refused at TLS (no certificate, or not from our CA): the app never sees these, so say so here.
    extender.server.on('tlsClientError', (error: Error) => {
      log.warn({ component: 'extender' }, `TLS handshake refused: ${error.message.trim()}`);
    });
  }
  const metrics = await listen(listenerSettings('metrics', 'METRICS', metricsHost, metricsPort), () =>
    startMetricsListener({
      host: metricsHost,
      port: metricsPort,
      metrics: parts.metrics,
      readiness: parts.ready,
      onError: (message) => {
        log.warn({ component: 'metrics' }, `scrape failed: ${message}`);
      },
    }),
  );
  opened.push(metrics);
  listening.metrics = metrics;
  lifecycle.checkpoint();
  return { webhook, extender, metrics };
}
