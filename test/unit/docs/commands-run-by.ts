/**
 * Which test runs each command the docs show (README.md and docs/*.md; the extraction rule is in
 * doc-commands.test.ts). Keyed by the command as extracted: prompt, trailing comment and line
 * continuations gone, whitespace collapsed.
 *
 * - `runBy`: the files (tests, or the CI script) that run the command, or do what it does through
 *   the API when the test environment has no such binary (there is no kubectl in the test control
 *   plane; `how` says so). `contains` is the command's essence as that file spells it: the check
 *   fails when the file no longer holds it, so a test that stops exercising the command is noticed.
 * - `illustrative`: an output example or a command that cannot run in a test (a registry push, a
 *   Docker engine, the reader's own cluster), with the reason.
 * - `runByNoTest`: shown and runnable, but no test runs it yet. Listed as pending by the check, so
 *   the gap stays visible instead of hidden behind a made-up mapping.
 */
export interface RunBy {
  /** Path from the repository root. */
  file: string;
  contains: readonly string[];
}

export type CommandEntry =
  | { command: string; runBy: readonly RunBy[]; how?: string }
  | { command: string; illustrative: string }
  | { command: string; runByNoTest: string };

const NO_KUBECTL = 'the test control plane has no kubectl';

export const COMMANDS_RUN_BY: readonly CommandEntry[] = [
  // README.md: the two commands and the quick start
  {
    command: 'npm ci && npm start',
    runBy: [
      {
        file: 'test/e2e/local-demo.test.ts',
        contains: ["main, 'local'", "'--demo', 'seed'", "'--nodes', 'simulated'", "'--nodes', 'real'"],
      },
    ],
    how: 'npm start is the build, then `vgpu-warden local`; the test runs `local` from source in both node modes, headless',
  },
  { command: 'npm ci && npm test', runBy: [{ file: '.ci/run', contains: ['npm ci', 'npm test'] }] },
  {
    command: 'kubectl create namespace vgpu-warden',
    runBy: [
      {
        file: 'test/integration/hami-migration.test.ts',
        contains: ['core.createNamespace({ body: { metadata: { name: wardenNamespace'],
      },
    ],
    how: `creates the release namespace through the API before helm install (${NO_KUBECTL})`,
  },
  {
    command:
      'kubectl label namespace vgpu-warden hami.io/webhook=ignore pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/enforce-version=latest',
    runBy: [
      {
        file: 'test/integration/helm-chart.test.ts',
        contains: [
          "'pod-security.kubernetes.io/enforce': 'restricted'",
          "'pod-security.kubernetes.io/enforce-version': 'latest'",
          "'hami.io/webhook': 'ignore'",
          'violates PodSecurity',
        ],
      },
    ],
    how: `labels a namespace with these labels through the API (${NO_KUBECTL}), then the chart's pods are admitted there and a privileged one is refused`,
  },
  {
    command:
      'helm install vgpu-warden charts/vgpu-warden -n vgpu-warden --set image.repository=registry.example.com/gpu/vgpu-warden --set image.tag=0.1.0',
    runBy: [
      {
        file: 'test/integration/helm-chart.test.ts',
        contains: [
          "'image.repository'",
          "'image.tag'",
          "tags kube-scheduler with the cluster's version without a distribution suffix",
        ],
      },
      { file: 'test/integration/hami-migration.test.ts', contains: ["'install', 'vgpu-warden', CHART_DIR"] },
    ],
    how: "helm-chart renders the chart with these values, dry-runs it on the real apiserver, and checks kube-scheduler's tag follows the cluster's version with none set; hami-migration installs it with the real helm and no kube-scheduler tag",
  },
  {
    command: 'kubectl -n vgpu-warden rollout status deployment/vgpu-warden deployment/vgpu-warden-scheduler',
    runByNoTest:
      "no test runs the two Deployments (manifests-apply.test.ts runs serve and kube-scheduler as processes with the Deployments' ServiceAccounts)",
  },
  {
    command: 'npx vgpu-warden locks',
    runBy: [{ file: 'test/integration/locks-command.test.ts', contains: ["'locks'"] }],
    how: 'runs the locks command in process against the real apiserver',
  },
  {
    command: 'npx vgpu-warden explain team-a/train-0',
    runBy: [
      { file: 'test/integration/explain-command.test.ts', contains: ["runCli(['explain', `${namespace}/${name}`"] },
    ],
    how: 'runs the explain command in process against the real apiserver',
  },

  // docs/configuration.md
  {
    command: 'NODELOCK_EXPIRE=soon vgpu-warden serve',
    runBy: [
      {
        file: 'test/unit/config/config.test.ts',
        contains: ["NODELOCK_EXPIRE: 'soon'", 'expected a positive duration such as 5m'],
      },
    ],
    how: 'the settings check every command runs before anything starts, with that environment',
  },
  {
    command: 'vgpu-warden serve --webhook-port 70000',
    runBy: [
      {
        file: 'test/unit/config/config.test.ts',
        contains: ["WEBHOOK_PORT: '70000'", 'expected a port number from 1 to 65535'],
      },
    ],
    how: 'the same check with the value from the environment; the flag form only changes the origin in the message',
  },
  {
    command: 'HAMI_NODELOCK_EXPIRE=30s vgpu-warden locks',
    runBy: [
      {
        file: 'test/unit/commands/locks-command.test.ts',
        contains: ["HAMI_NODELOCK_EXPIRE: '30s'", 'must be longer than BIND_GRACE'],
      },
    ],
  },
  {
    command: 'EXTENDER_PORT=9443 vgpu-warden serve',
    runBy: [
      {
        file: 'test/unit/config/config.test.ts',
        contains: ["EXTENDER_PORT: '9443'", 'cannot share a port on overlapping addresses'],
      },
    ],
  },
  {
    command: 'KUBECONFIG=/x/y vgpu-warden locks',
    runBy: [
      {
        file: 'test/unit/kube/kubeconfig-resolution.test.ts',
        contains: ["fromEnv('/x/y')", 'KUBECONFIG (env): /x/y: no such file'],
      },
    ],
    how: 'the kubeconfig resolution locks runs first',
  },
  {
    command: 'vgpu-warden locks --kubeconfig /etc/hostname',
    runBy: [
      { file: 'test/unit/kube/kubeconfig-resolution.test.ts', contains: ['is not a kubeconfig'] },
      { file: 'test/integration/kubeconfig-resolution.test.ts', contains: ["runCli(['locks'"] },
    ],
  },
  {
    command: 'vgpu-warden locks',
    runBy: [
      { file: 'test/unit/kube/kubeconfig-resolution.test.ts', contains: ['no kubeconfig found'] },
      { file: 'test/integration/locks-command.test.ts', contains: ["'locks'"] },
    ],
  },

  // docs/extender.md
  {
    command:
      'kubectl get events --field-selector involvedObject.name=train-0,reason=FilteringFailed -o custom-columns=REASON:.reason,MESSAGE:.message',
    runBy: [
      { file: 'test/e2e/gpu-policies.test.ts', contains: ['ExclusiveDeviceAllocateConflict', 'FilteringFailed'] },
    ],
    how: `reads the pod's Events through the API (${NO_KUBECTL})`,
  },
  {
    command:
      'kubectl get events --field-selector involvedObject.name=train-1,reason=FilteringFailed -o custom-columns=MESSAGE:.message',
    runBy: [{ file: 'test/e2e/gpu-policies.test.ts', contains: ['fastest', 'FilteringFailed'] }],
    how: `reads the pod's Events through the API (${NO_KUBECTL})`,
  },
  {
    command:
      'kubectl get events --field-selector involvedObject.name=train-1,reason=FailedScheduling -o custom-columns=MESSAGE:.message',
    runBy: [{ file: 'test/e2e/gpu-policies.test.ts', contains: ['fastest', 'FailedScheduling'] }],
    how: `reads the pod's Events through the API (${NO_KUBECTL})`,
  },
  {
    command: 'kubectl describe pod -n ml train-0 | grep FilteringFailed',
    runBy: [
      {
        file: 'test/e2e/plugin-liveness.test.ts',
        contains: ['FilteringFailed', 'status.allocatable["nvidia.com/gpu"] is 0'],
      },
    ],
    how: `reads the pod's FilteringFailed Event through the API (${NO_KUBECTL})`,
  },
  {
    command: 'kubectl get node gpu-7 -o jsonpath=\'{.status.allocatable.nvidia\\.com/gpu}{"\\n"}\'',
    illustrative:
      'an output example of what kubelet publishes on a real GPU node; plugin-liveness.test.ts sets and reads status.allocatable through the API',
  },

  // docs/install.md
  {
    command: 'kubectl version | grep Server',
    illustrative:
      "reads the reader's cluster version to pin kube-scheduler in a kustomize overlay; the test control plane's version is pinned in tools/k8s/versions.env",
  },
  {
    command: 'docker build -t vgpu-warden:0.1.0 .',
    illustrative:
      'needs a Docker engine, which the tests do not have; test/e2e/image.test.ts builds the same Dockerfile runtime stage with buildah and test/unit/dockerfile.test.ts checks the Dockerfile',
  },
  { command: 'npm run image', runBy: [{ file: 'test/e2e/image.test.ts', contains: ['tools/image/build.sh'] }] },
  {
    command: 'npm run release',
    runBy: [
      { file: 'test/e2e/release.test.ts', contains: ["'tools', 'release', 'release.sh'"] },
      { file: 'package.json', contains: ['bash tools/setup/setup.sh --for release && bash tools/release/release.sh'] },
    ],
    how: 'the e2e test runs the script npm run release runs after its set-up step, into a directory of its own',
  },
  {
    command: 'sha256sum -c SHA256SUMS',
    runBy: [{ file: 'test/e2e/release.test.ts', contains: ["runOk('sha256sum', ['-c', 'SHA256SUMS'], out)"] }],
  },
  {
    command: 'buildah pull oci-archive:vgpu-warden-0.1.0.oci.tar',
    runBy: [{ file: 'test/e2e/release.test.ts', contains: ["['pull', '--quiet', `oci-archive:${ARCHIVE}`]"] }],
  },
  {
    command: 'buildah push vgpu-warden:0.1.0 docker://registry.example.com/gpu/vgpu-warden:0.1.0',
    runBy: [{ file: 'test/e2e/release.test.ts', contains: ["['push', '--quiet', ARCHIVE_IMAGE, `dir:${pushed}`]"] }],
    how: 'pushes the loaded image by that name to a directory, since a test cannot reach or own a registry',
  },
  {
    command:
      'helm install vgpu-warden vgpu-warden-0.1.0.tgz -n vgpu-warden --set image.repository=registry.example.com/gpu/vgpu-warden',
    runBy: [
      {
        file: 'test/e2e/release.test.ts',
        contains: [
          "'install', 'vgpu-warden', join(out, CHART)",
          '`image.repository=${REGISTRY_REPOSITORY}`',
          "'--dry-run=server'",
          'ServerSideApply',
        ],
      },
    ],
    how: "installs the packaged chart on the real apiserver as a server-side dry run (helm install --dry-run=server, and every object applied with dryRun=All); it also sets kubeScheduler.image.tag, to the control plane's own version, which is the tag the chart takes without it",
  },
  {
    command: 'buildah push localhost/vgpu-warden:0.1.0 docker://registry.example.com/gpu/vgpu-warden:0.1.0',
    illustrative: 'pushes to a registry, which a test cannot reach or own',
  },
  {
    command: 'docker tag vgpu-warden:0.1.0 registry.example.com/gpu/vgpu-warden:0.1.0',
    illustrative: 'needs a Docker engine, which the tests do not have',
  },
  {
    command: 'docker push registry.example.com/gpu/vgpu-warden:0.1.0',
    illustrative: 'pushes to a registry, which a test cannot reach or own',
  },
  {
    command: 'kubectl apply --server-side -k overlays/prod',
    runBy: [{ file: 'test/integration/manifests-apply.test.ts', contains: ["api.create(object, undefined, 'All')"] }],
    how: `dry-runs every object of the kustomize base on the real apiserver (the overlay is the reader's; ${NO_KUBECTL})`,
  },
  {
    command: 'helm template vgpu-warden charts/vgpu-warden --set admissionPolicies.mode=block',
    runBy: [
      {
        file: 'test/integration/helm-chart.test.ts',
        contains: ["'admissionPolicies.mode': 'block'", 'must be deny or warn, not "block"'],
      },
    ],
  },
  {
    command: 'helm template vgpu-warden charts/vgpu-warden --kube-version 1.29.4',
    runBy: [
      {
        file: 'test/integration/helm-chart.test.ts',
        contains: [
          "'--kube-version', '1.29.4'",
          'chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.4',
        ],
      },
    ],
  },
  {
    command: 'helm template vgpu-warden charts/vgpu-warden --set locks.expiry=5m',
    runBy: [
      {
        file: 'test/integration/helm-chart.test.ts',
        contains: [
          "'locks.expiry': '5m'",
          "additional properties 'expiry' not allowed",
          "values don't meet the specifications of the schema",
        ],
      },
    ],
    how: 'renders with that value and expects the schema refusal naming the key (with the other misspellings and wrong types of values.schema.json)',
  },

  // docs/migrate-from-hami.md
  {
    command: 'helm list -A | grep hami',
    runBy: [
      { file: 'test/integration/hami-migration.test.ts', contains: ["helmOk(['list', '-A']", "line.includes('hami')"] },
    ],
    how: "lists the releases and keeps the lines naming hami in the test, where grep would (the stand-in's release name contains hami, as HAMi's does)",
  },
  {
    command:
      'kubectl -n kube-system get daemonset hami-device-plugin -o jsonpath=\'{.spec.template.spec.containers[*].image}{"\\n"}\'',
    illustrative:
      "reads the HAMi device-plugin version of the reader's cluster; the test cluster runs a stand-in chart, not HAMi's images",
  },
  {
    command:
      'helm upgrade hami hami-charts/hami -n kube-system --version 2.10.0 --reuse-values --set scheduler.leaderElect=true --set scheduler.replicas=0 --set scheduler.admissionWebhook.enabled=false',
    runBy: [
      {
        file: 'test/integration/hami-migration.test.ts',
        contains: [
          "'upgrade', hami, HAMI_CHART",
          "'--reuse-values'",
          "'scheduler.leaderElect=true'",
          "'scheduler.replicas=0'",
          "'scheduler.admissionWebhook.enabled=false'",
        ],
      },
    ],
    how: "against a stand-in for HAMi's chart with HAMi's value keys",
  },
  {
    command: 'kubectl -n kube-system get deployment hami-scheduler',
    runBy: [
      {
        file: 'test/integration/hami-migration.test.ts',
        contains: ['readNamespacedDeployment({ name: `${hami}-scheduler`'],
      },
    ],
    how: `reads the scheduler Deployment through the API and checks its replicas (${NO_KUBECTL})`,
  },
  {
    command:
      'helm install vgpu-warden charts/vgpu-warden -n vgpu-warden -f charts/vgpu-warden/values-hami-migration.yaml --set hamiMigration.release=hami --set hamiMigration.namespace=kube-system --set image.repository=registry.example.com/gpu/vgpu-warden --set kubeScheduler.image.tag=v1.31.6',
    runBy: [
      {
        file: 'test/integration/hami-migration.test.ts',
        contains: [
          "'install', 'vgpu-warden', CHART_DIR",
          'MIGRATION_VALUES',
          'hamiMigration.release=',
          'hamiMigration.namespace=',
        ],
      },
    ],
  },
  {
    command:
      'helm upgrade vgpu-warden charts/vgpu-warden -n vgpu-warden --reuse-values --set admissionPolicies.mode=deny',
    runBy: [
      {
        file: 'test/integration/hami-migration.test.ts',
        contains: ["'--reuse-values', '--set', 'admissionPolicies.mode=deny'", "to.deep.equal(['Deny'])"],
      },
    ],
  },
  {
    command: 'helm uninstall vgpu-warden -n vgpu-warden',
    runBy: [{ file: 'test/integration/hami-migration.test.ts', contains: ["'uninstall', 'vgpu-warden'"] }],
  },
  {
    command: 'kubectl delete namespace vgpu-warden',
    runBy: [
      {
        file: 'test/integration/hami-migration.test.ts',
        contains: ['core.deleteNamespace({ name: wardenNamespace })'],
      },
    ],
    how: `deletes the release namespace through the API after the uninstall (${NO_KUBECTL})`,
  },
  {
    command: 'helm history hami -n kube-system',
    runBy: [
      { file: 'test/integration/hami-migration.test.ts', contains: ["helmOk(['history', hami", 'Install complete'] },
    ],
  },
  {
    command: 'helm rollback hami 1 -n kube-system',
    runBy: [{ file: 'test/integration/hami-migration.test.ts', contains: ["'rollback', hami, '1'"] }],
  },

  // docs/operate.md
  {
    command: 'vgpu-warden explain train-0',
    runBy: [{ file: 'test/unit/commands/explain-command.test.ts', contains: ["[['train-0'],", 'is not <namespace>'] }],
  },
  {
    command: 'vgpu-warden local --exit-after-demo',
    runBy: [
      {
        file: 'test/unit/commands/cli.test.ts',
        contains: ["['local', '--exit-after-demo']", '--exit-after-demo needs --demo for "local"'],
      },
      { file: 'test/unit/commands/local-command.test.ts', contains: ['--exit-after-demo'] },
    ],
  },
  {
    command: 'node dist/bin.js --help',
    runBy: [{ file: 'test/unit/bin.test.ts', contains: ["run(['--help'], '20.11.1')", 'needs Node.js >='] }],
    how: 'runs the bin as an older Node would see it',
  },
  {
    command: 'npx vgpu-warden --help',
    runBy: [{ file: 'test/unit/bin.test.ts', contains: ["run(['--help'])"] }],
    how: 'runs the bin on the pinned Node',
  },
  {
    command: 'kubectl -n vgpu-warden exec deploy/vgpu-warden -- vgpu-warden locks',
    runBy: [
      {
        file: 'test/e2e/image.test.ts',
        contains: [
          "['vgpu-warden', 'locks']",
          "SERVICE_ACCOUNT_MOUNT = '/run/secrets/kubernetes.io/serviceaccount'",
          'target: SERVICE_ACCOUNT_MOUNT',
          'KUBERNETES_SERVICE_HOST',
          'applyShippedIdentities',
        ],
      },
    ],
    how: `runs vgpu-warden locks from the built image's PATH as its USER, with no kubeconfig and the Deployment's ServiceAccount token mounted where the kubelet mounts it (/run/secrets/…, which the image's /var/run links to; ${NO_KUBECTL})`,
  },
  {
    command: 'vgpu-warden locks --context prod',
    runBy: [
      {
        file: 'test/unit/commands/cli.test.ts',
        contains: ["['locks', '--context', 'prod']", 'context (flag --context) "prod" is not among its contexts'],
      },
      { file: 'test/integration/cli-context.test.ts', contains: ["'--context', 'test'"] },
    ],
    how: 'the unit test runs it against a kubeconfig without that context; the integration test picks an existing one on the real apiserver',
  },
  {
    command: 'EXTENDER_PORT=9444 vgpu-warden serve',
    runBy: [
      { file: 'test/integration/serve-lifecycle.test.ts', contains: ['cannot listen on', 'address already in use'] },
    ],
  },
  {
    command: 'echo $?',
    illustrative: 'prints the exit code of the command shown just before it; the tests of that command assert the code',
  },
  {
    command: 'curl -s http://127.0.0.1:9395/readyz',
    runBy: [
      { file: 'test/integration/serve-lifecycle.test.ts', contains: ['/readyz', '(POD_NAMESPACE) does not exist'] },
    ],
  },
  {
    command: 'kubectl describe pod -n team-a too-big',
    runBy: [{ file: 'test/integration/event-aggregation.test.ts', contains: ['FilteringFailed', 'count'] }],
    how: `reads the aggregated Event through the API (${NO_KUBECTL})`,
  },
  {
    command:
      'kubectl get events -n team-a --field-selector reason=FilteringFailed -o custom-columns=OBJECT:.involvedObject.name,COUNT:.count,FIRST:.firstTimestamp,LAST:.lastTimestamp',
    runBy: [
      { file: 'test/integration/event-aggregation.test.ts', contains: ['FilteringFailed', 'count', 'lastTimestamp'] },
    ],
    how: `reads the aggregated Event through the API (${NO_KUBECTL})`,
  },
  {
    command: 'kubectl logs -n vgpu-warden deploy/vgpu-warden | grep \'"component":"lock"\' | grep -i stall',
    runBy: [
      { file: 'test/unit/telemetry/lock-telemetry.test.ts', contains: ['is still stalled', 'no longer stalled'] },
    ],
    how: 'checks the stall lines the lock telemetry logs (no Deployment runs in the tests)',
  },
  {
    command:
      'kubectl get events -A --field-selector reason=NodeLockStalled -o custom-columns=KIND:.involvedObject.kind,NAME:.involvedObject.name,COUNT:.count',
    runBy: [{ file: 'test/e2e/telemetry.test.ts', contains: ['NodeLockStalled', 'count'] }],
    how: `reads the node's and the pod's NodeLockStalled Events through the API (${NO_KUBECTL})`,
  },
  {
    command:
      'kubectl get events --field-selector involvedObject.name=train-0 -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message',
    runBy: [{ file: 'test/e2e/hami-metrics.test.ts', contains: ['FilteringSucceed', 'BindingSucceed'] }],
    how: `reads the pod's Events through the API (${NO_KUBECTL})`,
  },
  {
    command:
      "curl -s http://127.0.0.1:9395/metrics | grep -E '^(hami_gpu_(memory_allocated_bytes|shared_count|core_allocated_ratio)|GPUDeviceSharedNum)\\{'",
    runBy: [
      {
        file: 'test/e2e/hami-metrics.test.ts',
        contains: ['scrapeMetrics', 'hami_gpu_memory_allocated_bytes', 'GPUDeviceSharedNum'],
      },
    ],
  },
  {
    command:
      "curl -s http://127.0.0.1:9395/metrics | grep -E '^(hami_vgpu_|vGPUCoreAllocated|hami_resource_quota_|QuotaUsed)'",
    runBy: [
      {
        file: 'test/e2e/hami-metrics.test.ts',
        contains: ['scrapeMetrics', 'hami_vgpu_memory_allocated_bytes', 'vGPUCoreAllocated'],
      },
      { file: 'test/e2e/gpu-quota.test.ts', contains: ['hami_resource_quota_used'] },
    ],
  },

  // docs/quota.md
  {
    command:
      'kubectl -n team-a get events --field-selector involvedObject.name=train-2 -o custom-columns=REASON:.reason,MESSAGE:.message',
    runBy: [
      { file: 'test/e2e/gpu-quota.test.ts', contains: ['ResourceQuotaNotFit', 'FailedScheduling', 'FilteringFailed'] },
    ],
    how: `reads the pod's Events through the API (${NO_KUBECTL})`,
  },

  // docs/testing.md (test/unit/soak/docs-commands.test.ts runs what testing.md shows)
  {
    command: 'npm run test:soak -- --runs 3',
    runBy: [
      { file: 'test/unit/soak/docs-commands.test.ts', contains: ["'npm run test:soak -- --runs 3'", 'parseSoakArgs'] },
    ],
  },
  {
    command: 'npm run test:soak -- --runs 3 --load',
    runBy: [
      {
        file: 'test/unit/soak/docs-commands.test.ts',
        contains: ["'npm run test:soak -- --runs 3 --load'", 'parseSoakArgs'],
      },
    ],
  },
  {
    command: 'npx mocha --node-option import=tsx test/unit/test-support/eventually.test.ts',
    runBy: [{ file: 'test/unit/soak/docs-commands.test.ts', contains: ["startsWith('npx mocha ')", 'spawnSync'] }],
  },

  // docs/troubleshooting.md
  {
    command: 'vgpu-warden explain team-a/train-0',
    runBy: [
      { file: 'test/integration/explain-command.test.ts', contains: ["runCli(['explain', `${namespace}/${name}`"] },
    ],
  },
  {
    command: 'vgpu-warden explain team-a/train-0 -o json',
    runBy: [
      {
        file: 'test/integration/explain-command.test.ts',
        contains: ["runCli(['explain', `${namespace}/${name}`", "['-o', 'json']"],
      },
    ],
  },
  {
    command: 'kubectl vgpu-warden explain team-a/train-0',
    runByNoTest:
      "kubectl's plugin dispatch is not run; test/unit/bin.test.ts only checks that the package installs the bin as kubectl-vgpu_warden",
  },

  // docs/webhook.md
  {
    command:
      'kubectl -n vgpu-warden set env deployment/vgpu-warden OVERWRITE_ENV=true RUNTIME_CLASS_NAME=nvidia GPU_CORE_POLICY=force',
    runBy: [
      {
        file: 'test/integration/webhook-admission.test.ts',
        contains: ["overwriteEnv: true, runtimeClassName: 'nvidia', gpuCorePolicy: 'force'"],
      },
    ],
    how: `runs the webhook with these settings on the real apiserver (no Deployment runs in the tests; ${NO_KUBECTL})`,
  },
  {
    command: "kubectl apply -f - <<'YAML'",
    runBy: [
      {
        file: 'test/integration/webhook-admission.test.ts',
        contains: ["HAMi's webhook settings (overwriteEnv, runtimeClassName, gpuCorePolicy)"],
      },
    ],
    how: `creates such GPU pods through the API (${NO_KUBECTL})`,
  },
  {
    command:
      'kubectl get pod trainer -o jsonpath=\'{.spec.runtimeClassName}{"\\n"}{.spec.containers[0].env}{"\\n"}{.spec.containers[1].env}{"\\n"}\'',
    runBy: [
      {
        file: 'test/integration/webhook-admission.test.ts',
        contains: ['NVIDIA_VISIBLE_DEVICES', 'GPU_CORE_UTILIZATION_POLICY', 'runtimeClassName'],
      },
    ],
    how: `reads what the webhook set on the pod through the API (${NO_KUBECTL})`,
  },
];
