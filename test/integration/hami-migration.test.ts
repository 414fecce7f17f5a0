import { resolve } from 'node:path';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  loadYaml,
  type V1ValidatingAdmissionPolicy,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { httpStatusOf } from '../../src/kube/errors.js';
import { untilPoliciesLifted } from '../support/admission-policies.js';
import { CHART_DIR, helm, helmBinary, helmOk } from '../support/helm.js';
import { testCluster, uniqueName } from '../support/test-cluster.js';

/** HAMi's chart stand-in: HAMi's names and values keys for the scheduler, its webhook and the device plugin. */
const HAMI_CHART = resolve(import.meta.dirname, '..', 'support', 'fixtures', 'hami-standin-chart');
const MIGRATION_VALUES = resolve(CHART_DIR, 'values-hami-migration.yaml');

/**
 * The documented migration (docs/migrate-from-hami.md), on the real apiserver with the real helm:
 * HAMi's chart scales its own scheduler to 0 and drops its webhook through HAMi's values, vgpu-warden's
 * chart takes over the scheduler name next to HAMi's device plugin, and the rollback restores HAMi.
 */
describe('migrating from HAMi: HAMi scaled to 0 through its chart values, vgpu-warden takes over, rollback restores HAMi (real apiserver, real helm)', function () {
  this.timeout(180_000);

  before(async function () {
    this.timeout(20 * 60_000);
    await helmBinary();
  });

  it('refuses to install while HAMi schedules, takes over its scheduler name once HAMi is scaled down, and rolls back', async () => {
    const { kubeConfig, core, namespace: hamiNamespace, controlPlane } = testCluster();
    const kubeconfig = controlPlane.kubeconfigPath;
    const apps = kubeConfig.makeApiClient(AppsV1Api);
    const admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    // HAMi's fullname is the release name when it contains "hami": <release>-scheduler, <release>-webhook, ...
    const hami = uniqueName('hami');
    const wardenNamespace = `${hamiNamespace}-warden`.slice(0, 63);
    await core.createNamespace({
      body: { metadata: { name: wardenNamespace, labels: { 'vgpu-warden.test/run': 'true' } } },
    });
    const scheduler = () => apps.readNamespacedDeployment({ name: `${hami}-scheduler`, namespace: hamiNamespace });
    const hamiWebhook = () =>
      admission.readMutatingWebhookConfiguration({ name: `${hami}-webhook` }).then(
        () => true,
        (error: unknown) => {
          if (httpStatusOf(error) === 404) return false;
          throw error;
        },
      );
    const wardenValues = [
      '--values',
      MIGRATION_VALUES,
      '--set',
      `hamiMigration.release=${hami}`,
      '--set',
      `hamiMigration.namespace=${hamiNamespace}`,
    ];
    let wardenInstalled = false;
    try {
      // HAMi as installed: its scheduler at 1 replica, its webhook registered, its device plugin.
      await helmOk(['install', hami, HAMI_CHART, '--namespace', hamiNamespace], kubeconfig);
      expect((await scheduler()).spec?.replicas).to.equal(1);
      expect(await hamiWebhook()).to.equal(true);
      const devicePlugin = await apps.readNamespacedDaemonSet({
        name: `${hami}-device-plugin`,
        namespace: hamiNamespace,
      });
      // The guide's first step finds the release: `helm list -A | grep hami`.
      const releases = (await helmOk(['list', '-A'], kubeconfig)).split('\n').filter((line) => line.includes('hami'));
      expect(
        releases.some((line) => line.startsWith(`${hami} `) || line.startsWith(`${hami}\t`)),
        releases.join('\n'),
      ).to.equal(true);

      // vgpu-warden's chart refuses to serve HAMi's scheduler name while HAMi's scheduler runs; nothing is installed.
      const refused = await helm(
        ['install', 'vgpu-warden', CHART_DIR, '--namespace', wardenNamespace, ...wardenValues],
        kubeconfig,
      );
      expect(refused.code).to.not.equal(0);
      expect(refused.stderr)
        .to.include(`HAMi's scheduler Deployment ${hamiNamespace}/${hami}-scheduler still has 1 replica(s)`)
        .and.include('--set scheduler.replicas=0');
      expect(
        await apps.readNamespacedDeployment({ name: 'vgpu-warden', namespace: wardenNamespace }).then(
          () => 200,
          (error: unknown) => httpStatusOf(error),
        ),
      ).to.equal(404);

      // Step 1, HAMi's chart with HAMi's own values: scheduler to 0, webhook off. The device plugin stays as it was.
      await helmOk(
        [
          'upgrade',
          hami,
          HAMI_CHART,
          '--namespace',
          hamiNamespace,
          '--reuse-values',
          '--set',
          'scheduler.leaderElect=true',
          '--set',
          'scheduler.replicas=0',
          '--set',
          'scheduler.admissionWebhook.enabled=false',
        ],
        kubeconfig,
      );
      expect((await scheduler()).spec?.replicas).to.equal(0);
      expect(await hamiWebhook()).to.equal(false);
      // A later, unrelated upgrade of HAMi keeps the scheduler at 0: the values carry it (a hand-made
      // `kubectl scale` would be undone here).
      await helmOk(
        [
          'upgrade',
          hami,
          HAMI_CHART,
          '--namespace',
          hamiNamespace,
          '--reuse-values',
          '--set',
          'devicePlugin.enabled=true',
        ],
        kubeconfig,
      );
      expect((await scheduler()).spec?.replicas).to.equal(0);
      const keptPlugin = await apps.readNamespacedDaemonSet({
        name: `${hami}-device-plugin`,
        namespace: hamiNamespace,
      });
      expect(keptPlugin.metadata?.uid).to.equal(devicePlugin.metadata?.uid);
      expect(keptPlugin.metadata?.generation).to.equal(devicePlugin.metadata?.generation);

      // Step 2, vgpu-warden's chart with the migration values: it takes over HAMi's scheduler name.
      await helmOk(['install', 'vgpu-warden', CHART_DIR, '--namespace', wardenNamespace, ...wardenValues], kubeconfig);
      wardenInstalled = true;
      const hamiProfile = loadYaml<{ profiles: { schedulerName: string }[] }>(
        (await core.readNamespacedConfigMap({ name: `${hami}-scheduler`, namespace: hamiNamespace })).data?.[
          'config.yaml'
        ] ?? '',
      );
      const wardenProfile = loadYaml<{ profiles: { schedulerName: string }[] }>(
        (await core.readNamespacedConfigMap({ name: 'vgpu-warden-scheduler-config', namespace: wardenNamespace }))
          .data?.['config.yaml'] ?? '',
      );
      expect(wardenProfile.profiles.map((profile) => profile.schedulerName)).to.deep.equal(
        hamiProfile.profiles.map((profile) => profile.schedulerName),
      );
      expect(wardenProfile.profiles[0]?.schedulerName).to.equal('hami-scheduler');
      const warden = await apps.readNamespacedDeployment({ name: 'vgpu-warden', namespace: wardenNamespace });
      const env = Object.fromEntries(
        (warden.spec?.template.spec?.containers[0]?.env ?? []).map((variable) => [variable.name, variable.value]),
      );
      expect(env.SCHEDULER_NAME, "the webhook's SCHEDULER_NAME").to.equal('hami-scheduler');
      // HAMi's device plugin keeps writing what it writes: the policies name its ServiceAccount,
      // and only report (warn).
      const policy: V1ValidatingAdmissionPolicy = await admission.readValidatingAdmissionPolicy({
        name: 'vgpu-warden-scheduler-owned-pod-metadata',
      });
      expect(policy.spec?.variables?.find((entry) => entry.name === 'devicePluginUsers')?.expression).to.equal(
        `['system:serviceaccount:${hamiNamespace}:${hami}-device-plugin']`,
      );
      expect(keptPlugin.spec?.template.spec?.serviceAccountName).to.equal(`${hami}-device-plugin`);
      const binding = await admission.readValidatingAdmissionPolicyBinding({
        name: 'vgpu-warden-scheduler-owned-pod-metadata',
      });
      expect(binding.spec.validationActions).to.deep.equal(['Warn', 'Audit']);
      // Upgrading vgpu-warden passes the same check (HAMi still at 0).
      await helmOk(
        [
          'upgrade',
          'vgpu-warden',
          CHART_DIR,
          '--namespace',
          wardenNamespace,
          ...wardenValues,
          '--set',
          'locks.expire=6m',
        ],
        kubeconfig,
      );
      // Once HAMi's plugin is known to write only what the policies allow, the guide turns them to deny.
      await helmOk(
        [
          'upgrade',
          'vgpu-warden',
          CHART_DIR,
          '--namespace',
          wardenNamespace,
          '--reuse-values',
          '--set',
          'admissionPolicies.mode=deny',
        ],
        kubeconfig,
      );
      const denying = await admission.readValidatingAdmissionPolicyBinding({
        name: 'vgpu-warden-scheduler-owned-pod-metadata',
      });
      expect(denying.spec.validationActions).to.deep.equal(['Deny']);

      // Rollback: vgpu-warden out first (never two schedulers for one name), then HAMi's own rollback
      // to the revision before the migration restores its scheduler and webhook.
      await helmOk(['uninstall', 'vgpu-warden', '--namespace', wardenNamespace, '--wait'], kubeconfig);
      wardenInstalled = false;
      expect(
        await admission.readMutatingWebhookConfiguration({ name: 'vgpu-warden' }).then(
          () => 200,
          (error: unknown) => httpStatusOf(error),
        ),
      ).to.equal(404);
      // `helm history hami -n kube-system` names the revision before the migration: revision 1, the install.
      const history = await helmOk(['history', hami, '--namespace', hamiNamespace], kubeconfig);
      expect(
        history.split('\n').find((line) => /^1\s/.test(line)),
        history,
      ).to.match(/Install complete/);
      await helmOk(['rollback', hami, '1', '--namespace', hamiNamespace], kubeconfig);
      expect((await scheduler()).spec?.replicas).to.equal(1);
      expect(await hamiWebhook()).to.equal(true);
      expect(
        (await apps.readNamespacedDaemonSet({ name: `${hami}-device-plugin`, namespace: hamiNamespace })).metadata?.uid,
      ).to.equal(devicePlugin.metadata?.uid);
    } finally {
      if (wardenInstalled)
        await helm(['uninstall', 'vgpu-warden', '--namespace', wardenNamespace, '--wait'], kubeconfig);
      await helm(['uninstall', hami, '--namespace', hamiNamespace, '--wait'], kubeconfig);
      await core.deleteNamespace({ name: wardenNamespace }).catch(() => undefined);
      // The chart's bindings are cluster-wide and in deny mode by now: the next file must not meet them.
      await untilPoliciesLifted(core, hamiNamespace);
    }
  });
});
