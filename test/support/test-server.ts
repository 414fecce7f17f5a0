import { type RunningServer, startServer } from '../../src/serve/start-server.js';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/setting-spec.js';
import type { ControlPlane } from '../../src/local/control-plane.js';
import { findFreePorts } from '../../src/local/free-port.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { uniqueName } from './test-cluster.js';

/**
 * vgpu-warden's `serve` wiring in-process for a test: webhook, extender and metrics on free loopback
 * ports, certificates in `certDir`, its own Lease; `env` overrides any setting. Resolves once its
 * state store has synced. With `TEST_SERVER_LOG_LEVEL=info` it logs every lock decision.
 */
export async function startTestServer(
  plane: ControlPlane,
  certDir: string,
  env: Record<string, string> = {},
): Promise<{ server: RunningServer; config: Config }> {
  const [webhookPort = 0, extenderPort = 0, metricsPort = 0] = await findFreePorts(3);
  const config = loadConfig({
    KUBECONFIG: plane.kubeconfigPath,
    CERT_DIR: certDir,
    WEBHOOK_HOST: '127.0.0.1',
    WEBHOOK_PORT: String(webhookPort),
    EXTENDER_PORT: String(extenderPort),
    CERT_HOSTS: '127.0.0.1',
    LEASE_NAME: uniqueName('lease'),
    METRICS_HOST: '127.0.0.1',
    METRICS_PORT: String(metricsPort),
    POD_NAMESPACE: 'default',
    ...env,
  });
  const server = await startServer(
    config,
    createLogger(process.env.TEST_SERVER_LOG_LEVEL === 'info' ? 'info' : 'warn'),
  );
  await server.cache.waitForSync(30_000);
  return { server, config };
}
