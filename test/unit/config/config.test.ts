import { expect } from 'chai';
import { ConfigError } from '../../../src/config/setting-spec.js';
import { SETTINGS, SETTING_GROUPS, settingsOf } from '../../../src/config/settings.js';
import { listenAddressesOverlap } from '../../../src/base/net-hosts.js';
import { loadConfig } from '../../../src/config/load.js';

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
    [{ NODELOCK_EXPIRE: 'soon' }, 'invalid NODELOCK_EXPIRE (env) = "soon": expected a positive duration such as 5m'],
    [{ NODELOCK_EXPIRE: '0' }, 'invalid NODELOCK_EXPIRE (env) = "0": expected a positive duration such as 5m'],
    [{ HAMI_NODELOCK_EXPIRE: '5x' }, 'invalid NODELOCK_EXPIRE (env HAMI_NODELOCK_EXPIRE) = "5x"'],
    [{ WEBHOOK_PORT: '70000' }, 'invalid WEBHOOK_PORT (env) = "70000": expected a port number from 1 to 65535'],
    [{ METRICS_PORT: '12ab' }, 'invalid METRICS_PORT (env) = "12ab"'],
    [{ SWEEP_ENABLED: 'maybe' }, 'invalid SWEEP_ENABLED (env) = "maybe": expected true or false'],
    [{ SWEEP_SCHEDULE: 'every minute' }, 'invalid SWEEP_SCHEDULE (env) = "every minute": expected a cron expression'],
    [{ SWEEP_SCHEDULE: '* * * *' }, 'invalid SWEEP_SCHEDULE (env) = "* * * *"'],
    [{ SWEEP_SCHEDULE: '* * * * * * *' }, 'invalid SWEEP_SCHEDULE (env) = "* * * * * * *"'],
    [
      { LOG_LEVEL: 'loud' },
      'invalid LOG_LEVEL (env) = "loud": expected one of fatal, error, warn, info, debug, trace, silent',
    ],
    [{ SCHEDULER_NAME: 'Not_A_Name' }, 'invalid SCHEDULER_NAME (env) = "Not_A_Name"'],
    [{ EXTENDER_HOST: 'bad host' }, 'invalid EXTENDER_HOST (env) = "bad host"'],
    [
      { BIND_GRACE: '10m' },
      'BIND_GRACE (env) = 10m must be shorter than NODELOCK_EXPIRE (default 5m), or a bind in progress would count as expired; lower it or set NODELOCK_EXPIRE',
    ],
    [
      { NODELOCK_FORCE_AFTER: '2m' },
      'NODELOCK_FORCE_AFTER (env) = 2m must be longer than NODELOCK_EXPIRE (default 5m): forcing applies to locks already past expiry; raise it or set NODELOCK_EXPIRE',
    ],
    [{ DEFAULT_GPU_NUM: '-1' }, 'invalid DEFAULT_GPU_NUM (env) = "-1": expected a whole number from 0 to 64'],
    [{ OVERWRITE_DEFAULT_SCHEDULER: 'sometimes' }, 'invalid OVERWRITE_DEFAULT_SCHEDULER (env) = "sometimes"'],
    [{ WEBHOOK_DELETE_TIMEOUT: '0' }, 'invalid WEBHOOK_DELETE_TIMEOUT (env) = "0"'],
    [{ OVERWRITE_ENV: 'maybe' }, 'invalid OVERWRITE_ENV (env) = "maybe": expected true or false'],
    [
      { RUNTIME_CLASS_NAME: 'Nvidia Runtime' },
      'invalid RUNTIME_CLASS_NAME (env) = "Nvidia Runtime": expected a RuntimeClass name (DNS subdomain) such as nvidia, or empty',
    ],
    [{ GPU_CORE_POLICY: 'Force' }, 'invalid GPU_CORE_POLICY (env) = "Force": expected one of default, force, disable'],
    [{ GPU_CORE_POLICY: '' }, 'invalid GPU_CORE_POLICY (env) = "": expected one of default, force, disable'],
    [{ SERVICE_NAME: 'Vgpu.Warden' }, 'invalid SERVICE_NAME (env) = "Vgpu.Warden": expected a DNS label'],
    [{ POD_NAMESPACE: 'kube_system' }, 'invalid POD_NAMESPACE (env) = "kube_system"'],
    [{ CERT_HOSTS: 'ok.example,bad host' }, 'invalid CERT_HOSTS (env) = "ok.example,bad host"'],
    [{ CERT_HOSTS: '010.0.0.1' }, 'invalid CERT_HOSTS (env) = "010.0.0.1"'],
    [{ CERT_SECRET_NAME: 'Not/A/Name' }, 'invalid CERT_SECRET_NAME (env) = "Not/A/Name"'],
    [
      { CERT_RENEW_BEFORE: '9000h' },
      'CERT_RENEW_BEFORE (env) = 9000h must be shorter than CERT_VALIDITY (default 8760h), or every certificate would be renewed at once; lower it or set CERT_VALIDITY',
    ],
    [
      { EXTENDER_HOST: '0.0.0.0' },
      'EXTENDER_HOST (env) = 0.0.0.0 is not a loopback address, so EXTENDER_CLIENT_AUTH=true is required',
    ],
    [{ EXTENDER_HOST: '::' }, 'EXTENDER_HOST (env) = :: is not a loopback address'],
    [
      { EXTENDER_HOST: '10.0.0.7', EXTENDER_CLIENT_AUTH: 'false' },
      'EXTENDER_HOST (env) = 10.0.0.7 is not a loopback address',
    ],
    [{ EXTENDER_HOST: 'gpu.example.com' }, 'EXTENDER_HOST (env) = gpu.example.com is not a loopback address'],
    [{ EXTENDER_HOST: '::ffff:10.0.0.7' }, 'EXTENDER_HOST (env) = ::ffff:10.0.0.7 is not a loopback address'],
    [
      { EXTENDER_CLIENT_AUTH: 'yes please' },
      'invalid EXTENDER_CLIENT_AUTH (env) = "yes please": expected true or false',
    ],
    [{ EXTENDER_CLIENT_AUTH: 'true' }, 'EXTENDER_CLIENT_AUTH (env) = true needs CERT_SECRET_NAME'],
    [
      { EXTENDER_CLIENT_AUTH: 'true', CERT_SECRET_NAME: 'same', EXTENDER_CLIENT_SECRET_NAME: 'same' },
      'EXTENDER_CLIENT_SECRET_NAME (env) = same must differ from CERT_SECRET_NAME (env) = same: kube-scheduler mounts the client Secret and must never see the CA key',
    ],
    [
      { EXTENDER_CLIENT_AUTH: 'true', CERT_SECRET_NAME: 'vgpu-warden-scheduler-client' },
      'CERT_SECRET_NAME (env) = vgpu-warden-scheduler-client must differ from EXTENDER_CLIENT_SECRET_NAME (default vgpu-warden-scheduler-client)',
    ],
    [{ EXTENDER_CLIENT_SECRET_NAME: 'Not/A/Name' }, 'invalid EXTENDER_CLIENT_SECRET_NAME (env) = "Not/A/Name"'],
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

  it('names the setting and the flag when the bad value came from a flag', () => {
    expect(() => loadConfig({ NODELOCK_EXPIRE: '5m' }, { 'nodelock-expire': 'never' })).to.throw(
      ConfigError,
      'invalid NODELOCK_EXPIRE (flag --nodelock-expire) = "never"',
    );
  });

  it('blames the setting the user set, not the default it collides with', () => {
    expect(() => loadConfig({ HAMI_NODELOCK_EXPIRE: '30s' })).to.throw(
      ConfigError,
      'NODELOCK_EXPIRE (env HAMI_NODELOCK_EXPIRE) = 30s must be longer than BIND_GRACE (default 60s), or a bind in progress would count as expired; raise it or set BIND_GRACE',
    );
    expect(() => loadConfig({}, { 'bind-grace': '20s' })).to.throw(
      ConfigError,
      'BIND_GRACE (flag --bind-grace) = 20s must be longer than BIND_TIMEOUT (default 25s), or the sweeper could free a lock while its bind still runs; raise it or set BIND_TIMEOUT',
    );
    expect(() => loadConfig({ BIND_TIMEOUT: '10s' })).to.throw(
      ConfigError,
      'BIND_TIMEOUT (env) = 10s must be longer than BIND_LOCK_WAIT (default 15s): the lock wait is part of the bind; raise it or set BIND_LOCK_WAIT',
    );
    expect(() => loadConfig({ CERT_VALIDITY: '24h' })).to.throw(
      ConfigError,
      'CERT_VALIDITY (env) = 24h must be longer than CERT_RENEW_BEFORE (default 720h)',
    );
  });

  it('names both settings when the user set both sides of a relation', () => {
    expect(() => loadConfig({ BIND_GRACE: '2m', NODELOCK_EXPIRE: '1m' })).to.throw(
      ConfigError,
      'BIND_GRACE (env) = 2m must be shorter than NODELOCK_EXPIRE (env) = 1m, or a bind in progress would count as expired; change one of them',
    );
  });

  it('clips a long bad value to a bounded one-line message', () => {
    let caught: unknown;
    try {
      loadConfig({ SCHEDULER_NAME: 'x'.repeat(100_000) });
    } catch (error) {
      caught = error;
    }
    expect(caught).to.be.instanceOf(ConfigError);
    expect((caught as Error).message.length).to.be.below(400);
    expect((caught as Error).message)
      .to.include('invalid SCHEDULER_NAME (env) = "xxx')
      .and.include('…"');
  });

  describe('listeners on one port', () => {
    it('refuses two listeners on one port, naming both settings and blaming the one the user set', () => {
      expect(() => loadConfig({ EXTENDER_PORT: '9443' })).to.throw(
        ConfigError,
        'EXTENDER_PORT (env) = 9443 is also WEBHOOK_PORT (default 9443): the extender and webhook listeners cannot share a port on overlapping addresses (127.0.0.1 and 0.0.0.0); choose another port',
      );
      expect(() => loadConfig({ WEBHOOK_PORT: '9395' })).to.throw(
        ConfigError,
        'WEBHOOK_PORT (env) = 9395 is also METRICS_PORT (default 9395): the webhook and metrics listeners cannot share a port',
      );
      expect(() => loadConfig({}, { 'metrics-port': '9444', 'metrics-host': '127.0.0.1' })).to.throw(
        ConfigError,
        'METRICS_PORT (flag --metrics-port) = 9444 is also EXTENDER_PORT (default 9444)',
      );
    });

    it('allows one port on addresses that cannot collide', () => {
      expect(loadConfig({ WEBHOOK_HOST: '10.0.0.7', METRICS_HOST: '127.0.0.1', METRICS_PORT: '9443' })).to.deep.include(
        { webhookPort: 9443, metricsPort: 9443 },
      );
    });

    it('knows which listen addresses overlap', () => {
      expect(listenAddressesOverlap('0.0.0.0', '127.0.0.1')).to.equal(true);
      expect(listenAddressesOverlap('[::]', '10.0.0.1')).to.equal(true);
      expect(listenAddressesOverlap('localhost', '127.0.0.1')).to.equal(true);
      expect(listenAddressesOverlap('[::1]', 'LOCALHOST')).to.equal(true);
      expect(listenAddressesOverlap('10.0.0.1', '10.0.0.1')).to.equal(true);
      expect(listenAddressesOverlap('10.0.0.1', '127.0.0.1')).to.equal(false);
      expect(listenAddressesOverlap('127.0.0.2', 'localhost')).to.equal(false);
    });
  });

  describe('KUBECONFIG', () => {
    it('reads a ":"-separated list, skipping empty entries, and treats an empty value as unset', () => {
      expect(loadConfig({ KUBECONFIG: '/a/config::/b/config:' }).kubeconfig).to.deep.equal({
        paths: ['/a/config', '/b/config'],
        origin: 'KUBECONFIG (env)',
        explicit: false,
      });
      expect(loadConfig({ KUBECONFIG: '' }).kubeconfig).to.equal(undefined);
      expect(loadConfig({ KUBECONFIG: ':' }).kubeconfig).to.equal(undefined);
    });

    it('takes --kubeconfig as one file that must exist, over KUBECONFIG', () => {
      expect(loadConfig({ KUBECONFIG: '/a' }, { kubeconfig: '/x:y' }).kubeconfig).to.deep.equal({
        paths: ['/x:y'],
        origin: 'KUBECONFIG (flag --kubeconfig)',
        explicit: true,
      });
    });
  });

  describe('per-command settings', () => {
    it('reads and checks only the selected settings', () => {
      const config = loadConfig(
        { SWEEP_SCHEDULE: 'never', WEBHOOK_PORT: 'x', NODELOCK_EXPIRE: '10m' },
        {},
        settingsOf(['cluster', 'lockRules']),
      );
      expect(config.nodeLockExpireMs).to.equal(600_000);
      expect(() => loadConfig({ SWEEP_SCHEDULE: 'never' }, {}, settingsOf(['servingCertificate']))).not.to.throw();
      expect(() => loadConfig({ CERT_VALIDITY: 'x' }, {}, settingsOf(['servingCertificate']))).to.throw(
        ConfigError,
        'invalid CERT_VALIDITY (env) = "x"',
      );
    });

    it('checks a relation only when both of its settings are selected', () => {
      // BIND_TIMEOUT is not a lock rule, so its relation to BIND_GRACE does not concern `locks`.
      expect(loadConfig({ BIND_GRACE: '20s' }, {}, settingsOf(['lockRules'])).bindGraceMs).to.equal(20_000);
      expect(() => loadConfig({ BIND_GRACE: '10m' }, {}, settingsOf(['lockRules']))).to.throw(
        ConfigError,
        'BIND_GRACE (env) = 10m must be shorter than NODELOCK_EXPIRE',
      );
      expect(() => loadConfig({ EXTENDER_PORT: '9443' }, {}, settingsOf(['extender', 'metrics']))).not.to.throw();
    });

    it('refuses to hand out a setting that was not selected', () => {
      const config = loadConfig({}, {}, settingsOf(['lockRules']));
      expect(() => config.sweepSchedule).to.throw('setting SWEEP_SCHEDULE read by a command that does not declare it');
    });

    it('puts every setting in at least one group', () => {
      const grouped = new Set(settingsOf(Object.keys(SETTING_GROUPS) as (keyof typeof SETTING_GROUPS)[]));
      expect(SETTINGS.map((spec) => spec.key).filter((key) => !grouped.has(key))).to.deep.equal([]);
    });
  });

  it('reads the webhook and certificate settings', () => {
    const config = loadConfig({
      CERT_HOSTS: 'gpu.example.com, 10.0.0.7',
      CERT_SECRET_NAME: 'vgpu-warden-tls',
      DEFAULT_GPU_NUM: '0',
      POD_NAMESPACE: 'gpu-system',
    });
    expect(config).to.deep.include({
      certHosts: ['gpu.example.com', '10.0.0.7'],
      certSecretName: 'vgpu-warden-tls',
      defaultGpuCount: 0,
      namespace: 'gpu-system',
      webhookConfigName: undefined,
    });
  });

  it('serves the extender without client certificates on loopback only', () => {
    for (const host of ['127.0.0.1', '127.0.0.53', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1']) {
      expect(loadConfig({ EXTENDER_HOST: host }), host).to.deep.include({
        extenderHost: host,
        extenderClientAuth: false,
      });
    }
    expect(
      loadConfig({ EXTENDER_HOST: '0.0.0.0', EXTENDER_CLIENT_AUTH: 'true', CERT_SECRET_NAME: 'vgpu-warden-tls' }),
    ).to.deep.include({
      extenderHost: '0.0.0.0',
      extenderClientAuth: true,
      extenderClientSecretName: 'vgpu-warden-scheduler-client',
    });
    // A flag names itself in the refusal.
    expect(() => loadConfig({}, { 'extender-host': '0.0.0.0' })).to.throw(
      ConfigError,
      'EXTENDER_HOST (flag --extender-host) = 0.0.0.0 is not a loopback address',
    );
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

  describe("HAMi's webhook settings", () => {
    it("default to HAMi's chart values: overwriteEnv false, no runtimeClassName, gpuCorePolicy default", () => {
      expect(loadConfig({}, {}, settingsOf(['webhook']))).to.deep.include({
        overwriteEnv: false,
        runtimeClassName: undefined,
        gpuCorePolicy: 'default',
      });
    });

    it('reads them from env and flags, an empty RUNTIME_CLASS_NAME meaning unset', () => {
      expect(
        loadConfig({ OVERWRITE_ENV: 'true', RUNTIME_CLASS_NAME: 'nvidia', GPU_CORE_POLICY: 'force' }),
      ).to.deep.include({ overwriteEnv: true, runtimeClassName: 'nvidia', gpuCorePolicy: 'force' });
      expect(
        loadConfig(
          { GPU_CORE_POLICY: 'force' },
          { 'overwrite-env': 'on', 'runtime-class-name': '', 'gpu-core-policy': 'disable' },
        ),
      ).to.deep.include({ overwriteEnv: true, runtimeClassName: undefined, gpuCorePolicy: 'disable' });
    });

    it('belong to the webhook group', () => {
      expect(SETTING_GROUPS.webhook).to.include.members(['overwriteEnv', 'runtimeClassName', 'gpuCorePolicy']);
    });

    it('names the flag when a bad value came from one', () => {
      expect(() => loadConfig({}, { 'gpu-core-policy': 'strict' })).to.throw(
        ConfigError,
        'invalid GPU_CORE_POLICY (flag --gpu-core-policy) = "strict": expected one of default, force, disable',
      );
    });
  });
});
