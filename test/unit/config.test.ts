import { expect } from 'chai';
import { ConfigError, SETTINGS, loadConfig } from '../../src/config.js';

describe('config', () => {
  it('has documented defaults that pass their own validation', () => {
    const config = loadConfig({});
    expect(config).to.deep.include({
      kubeconfig: undefined,
      schedulerName: 'hami-scheduler',
      logLevel: 'info',
      webhookPort: 9443,
      extenderHost: '127.0.0.1',
      extenderPort: 9444,
      metricsPort: 9395,
      certDir: 'webhook-certs',
      bindGraceMs: 60_000,
      nodeLockExpireMs: 300_000,
      nodeLockForceAfterMs: undefined,
      sweepEnabled: true,
      sweepSchedule: '*/30 * * * * *',
    });
  });

  it('reads environment variables and lets a flag win over its variable', () => {
    const config = loadConfig(
      { NODELOCK_EXPIRE: '10m', SCHEDULER_NAME: 'from-env', SWEEP_ENABLED: 'false', WEBHOOK_PORT: '8443' },
      { 'scheduler-name': 'from-flag' },
    );
    expect(config.nodeLockExpireMs).to.equal(600_000);
    expect(config.schedulerName).to.equal('from-flag');
    expect(config.sweepEnabled).to.equal(false);
    expect(config.webhookPort).to.equal(8443);
  });

  it("reads HAMi's HAMI_NODELOCK_EXPIRE when NODELOCK_EXPIRE is unset, and prefers NODELOCK_EXPIRE", () => {
    expect(loadConfig({ HAMI_NODELOCK_EXPIRE: '7m' }).nodeLockExpireMs).to.equal(420_000);
    expect(loadConfig({ HAMI_NODELOCK_EXPIRE: '7m', NODELOCK_EXPIRE: '6m' }).nodeLockExpireMs).to.equal(360_000);
  });

  it('accepts 5- and 6-field cron schedules', () => {
    expect(loadConfig({ SWEEP_SCHEDULE: '*/5 * * * *' }).sweepSchedule).to.equal('*/5 * * * *');
    expect(loadConfig({ SWEEP_SCHEDULE: '*/10 * * * * *' }).sweepSchedule).to.equal('*/10 * * * * *');
  });

  const invalid: [Record<string, string>, string][] = [
    [{ NODELOCK_EXPIRE: 'soon' }, 'invalid NODELOCK_EXPIRE="soon": expected a positive duration such as 5m'],
    [{ NODELOCK_EXPIRE: '0' }, 'invalid NODELOCK_EXPIRE="0": expected a positive duration such as 5m'],
    [{ HAMI_NODELOCK_EXPIRE: '5x' }, 'invalid HAMI_NODELOCK_EXPIRE="5x"'],
    [{ WEBHOOK_PORT: '70000' }, 'invalid WEBHOOK_PORT="70000": expected a port number from 1 to 65535'],
    [{ METRICS_PORT: '12ab' }, 'invalid METRICS_PORT="12ab"'],
    [{ SWEEP_ENABLED: 'maybe' }, 'invalid SWEEP_ENABLED="maybe": expected true or false'],
    [{ SWEEP_SCHEDULE: 'every minute' }, 'invalid SWEEP_SCHEDULE="every minute": expected a cron expression'],
    [{ SWEEP_SCHEDULE: '* * * *' }, 'invalid SWEEP_SCHEDULE="* * * *"'],
    [{ SWEEP_SCHEDULE: '* * * * * * *' }, 'invalid SWEEP_SCHEDULE="* * * * * * *"'],
    [{ LOG_LEVEL: 'loud' }, 'invalid LOG_LEVEL="loud": expected one of fatal, error, warn, info, debug, trace, silent'],
    [{ SCHEDULER_NAME: 'Not_A_Name' }, 'invalid SCHEDULER_NAME="Not_A_Name"'],
    [{ EXTENDER_HOST: 'bad host' }, 'invalid EXTENDER_HOST="bad host"'],
    [{ BIND_GRACE: '10m' }, 'invalid BIND_GRACE="10m": must be shorter than NODELOCK_EXPIRE (5m)'],
    [{ NODELOCK_FORCE_AFTER: '2m' }, 'invalid NODELOCK_FORCE_AFTER="2m": must be longer than NODELOCK_EXPIRE (5m)'],
    [{ DEFAULT_GPU_NUM: '-1' }, 'invalid DEFAULT_GPU_NUM="-1": expected a whole number from 0 to 64'],
    [{ OVERWRITE_DEFAULT_SCHEDULER: 'sometimes' }, 'invalid OVERWRITE_DEFAULT_SCHEDULER="sometimes"'],
    [{ WEBHOOK_DELETE_TIMEOUT: '0' }, 'invalid WEBHOOK_DELETE_TIMEOUT="0"'],
    [{ SERVICE_NAME: 'Vgpu.Warden' }, 'invalid SERVICE_NAME="Vgpu.Warden": expected a DNS label'],
    [{ POD_NAMESPACE: 'kube_system' }, 'invalid POD_NAMESPACE="kube_system"'],
    [{ CERT_HOSTS: 'ok.example,bad host' }, 'invalid CERT_HOSTS="ok.example,bad host"'],
    [{ CERT_HOSTS: '010.0.0.1' }, 'invalid CERT_HOSTS="010.0.0.1"'],
    [{ CERT_SECRET_NAME: 'Not/A/Name' }, 'invalid CERT_SECRET_NAME="Not/A/Name"'],
    [{ CERT_RENEW_BEFORE: '9000h' }, 'invalid CERT_RENEW_BEFORE="9000h": must be shorter than CERT_VALIDITY (8760h)'],
    [{ EXTENDER_HOST: '0.0.0.0' }, 'invalid EXTENDER_HOST="0.0.0.0": not a loopback address, so EXTENDER_CLIENT_AUTH=true is required'],
    [{ EXTENDER_HOST: '::' }, 'invalid EXTENDER_HOST="::": not a loopback address'],
    [{ EXTENDER_HOST: '10.0.0.7', EXTENDER_CLIENT_AUTH: 'false' }, 'invalid EXTENDER_HOST="10.0.0.7": not a loopback address'],
    [{ EXTENDER_HOST: 'gpu.example.com' }, 'invalid EXTENDER_HOST="gpu.example.com": not a loopback address'],
    [{ EXTENDER_HOST: '::ffff:10.0.0.7' }, 'invalid EXTENDER_HOST="::ffff:10.0.0.7": not a loopback address'],
    [{ EXTENDER_CLIENT_AUTH: 'yes please' }, 'invalid EXTENDER_CLIENT_AUTH="yes please": expected true or false'],
    [{ EXTENDER_CLIENT_AUTH: 'true' }, 'invalid EXTENDER_CLIENT_AUTH="true": needs CERT_SECRET_NAME'],
    [{ EXTENDER_CLIENT_AUTH: 'true', CERT_SECRET_NAME: 'same', EXTENDER_CLIENT_SECRET_NAME: 'same' },
      'invalid EXTENDER_CLIENT_SECRET_NAME="same": must differ from CERT_SECRET_NAME: kube-scheduler mounts it, and must never see the CA key'],
    [{ EXTENDER_CLIENT_SECRET_NAME: 'Not/A/Name' }, 'invalid EXTENDER_CLIENT_SECRET_NAME="Not/A/Name"'],
  ];
  for (const [env, message] of invalid) {
    it(`fails on ${JSON.stringify(env)} with one line naming variable, value and rule`, () => {
      let caught: unknown;
      try {
        loadConfig(env);
      } catch (error) {
        caught = error;
      }
      expect(caught).to.be.instanceOf(ConfigError);
      expect((caught as Error).message).to.include(message);
      expect((caught as Error).message).not.to.include('\n');
    });
  }

  it('names the flag, not the variable, when the bad value came from a flag', () => {
    expect(() => loadConfig({ NODELOCK_EXPIRE: '5m' }, { 'nodelock-expire': 'never' })).to.throw(ConfigError, 'invalid --nodelock-expire="never"');
  });

  it('blames the default of a related setting it did not get', () => {
    expect(() => loadConfig({ NODELOCK_EXPIRE: '30s' })).to.throw(ConfigError, 'invalid BIND_GRACE="60s": must be shorter than NODELOCK_EXPIRE (30s)');
  });

  it('reads the webhook and certificate settings', () => {
    const config = loadConfig({ CERT_HOSTS: 'gpu.example.com, 10.0.0.7', CERT_SECRET_NAME: 'vgpu-warden-tls', DEFAULT_GPU_NUM: '0', POD_NAMESPACE: 'gpu-system' });
    expect(config).to.deep.include({ certHosts: ['gpu.example.com', '10.0.0.7'], certSecretName: 'vgpu-warden-tls', defaultGpuCount: 0, namespace: 'gpu-system', webhookConfigName: undefined });
  });

  it('serves the extender without client certificates on loopback only', () => {
    for (const host of ['127.0.0.1', '127.0.0.53', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1']) {
      expect(loadConfig({ EXTENDER_HOST: host }), host).to.deep.include({ extenderHost: host, extenderClientAuth: false });
    }
    expect(loadConfig({ EXTENDER_HOST: '0.0.0.0', EXTENDER_CLIENT_AUTH: 'true', CERT_SECRET_NAME: 'vgpu-warden-tls' })).to.deep.include({
      extenderHost: '0.0.0.0', extenderClientAuth: true, extenderClientSecretName: 'vgpu-warden-scheduler-client',
    });
    // A flag names itself in the refusal.
    expect(() => loadConfig({}, { 'extender-host': '0.0.0.0' })).to.throw(ConfigError, 'invalid --extender-host="0.0.0.0": not a loopback address');
  });

  it('treats an empty NODELOCK_FORCE_AFTER as never', () => {
    expect(loadConfig({ NODELOCK_FORCE_AFTER: '' }).nodeLockForceAfterMs).to.equal(undefined);
    expect(loadConfig({ NODELOCK_FORCE_AFTER: '15m' }).nodeLockForceAfterMs).to.equal(900_000);
  });

  it('declares each variable and flag once', () => {
    const envs = SETTINGS.map((spec) => spec.env);
    const flags = SETTINGS.map((spec) => spec.flag);
    expect(new Set(envs).size).to.equal(envs.length);
    expect(new Set(flags).size).to.equal(flags.length);
  });
});
