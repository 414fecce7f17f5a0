import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadYaml } from '@kubernetes/client-node';
import { expect } from 'chai';
import {
  DEFAULT_SCORE_PLUGIN_WEIGHTS,
  EXTENDER_WEIGHT,
  kubeSchedulerConfiguration,
  MAX_EXTENDER_PRIORITY,
  MAX_NODE_SCORE,
} from '../../../src/extender/scheduler-config.js';

interface Profile {
  schedulerName: string;
  plugins?: { multiPoint?: { disabled?: { name: string }[] } };
  pluginConfig?: { name: string; args: Record<string, unknown> }[];
}

function built(options: Partial<Parameters<typeof kubeSchedulerConfiguration>[0]> = {}): {
  profiles: Profile[];
  extenders: Record<string, unknown>[];
} {
  return kubeSchedulerConfiguration({ schedulerName: 'gpu', extenderUrl: 'https://127.0.0.1:1', ...options }) as {
    profiles: Profile[];
    extenders: Record<string, unknown>[];
  };
}

function argsOf(profile: Profile | undefined, plugin: string): Record<string, unknown> | undefined {
  return profile?.pluginConfig?.find((entry) => entry.name === plugin)?.args;
}

describe('kube-scheduler configuration', () => {
  it('manifests/kube-scheduler-config.yaml is exactly what the code builds for the cluster (binpack, the default policy)', () => {
    const shipped = loadYaml(
      readFileSync(resolve(import.meta.dirname, '..', '..', '..', 'manifests', 'kube-scheduler-config.yaml'), 'utf8'),
    );
    const clientDir = '/etc/vgpu-warden/extender-client';
    const cluster = {
      schedulerName: 'hami-scheduler',
      extenderUrl: 'https://vgpu-warden-extender.vgpu-warden.svc:443',
      clientTls: { certFile: `${clientDir}/tls.crt`, keyFile: `${clientDir}/tls.key`, caFile: `${clientDir}/ca.crt` },
      leaderElection: { leaderElect: true, resourceNamespace: 'vgpu-warden', resourceName: 'vgpu-warden-scheduler' },
    };
    expect(shipped).to.deep.equal(kubeSchedulerConfiguration({ ...cluster, nodePolicy: 'binpack' }));
    expect(kubeSchedulerConfiguration(cluster)).to.deep.equal(
      kubeSchedulerConfiguration({ ...cluster, nodePolicy: 'binpack' }),
    );
  });

  it('sends filter, prioritize and bind for the GPU resources only, ignored by the scheduler itself', () => {
    const config = built({ caPem: 'PEM' });
    expect(config.profiles.map((profile) => profile.schedulerName)).to.deep.equal(['gpu']);
    expect(config.extenders[0]).to.deep.include({
      filterVerb: 'filter',
      prioritizeVerb: 'prioritize',
      bindVerb: 'bind',
      nodeCacheCapable: true,
      httpTimeout: '30s',
      enableHTTPS: true,
    });
    expect(config.extenders[0]?.tlsConfig).to.deep.equal({ caData: Buffer.from('PEM').toString('base64') });
    expect(
      (config.extenders[0]?.managedResources as { name: string; ignoredByScheduler: boolean }[]).every(
        (resource) => resource.ignoredByScheduler,
      ),
    ).to.equal(true);
  });

  it('verifies the extender and presents a client certificate from files, skips verification only with neither CA nor files', () => {
    const files = { certFile: '/c/tls.crt', keyFile: '/c/tls.key', caFile: '/c/ca.crt' };
    expect(built({ clientTls: files }).extenders[0]?.tlsConfig).to.deep.equal(files);
    expect(built().extenders[0]?.tlsConfig).to.deep.equal({ insecure: true });
    expect(() => built({ clientTls: files, caPem: 'PEM' })).to.throw(TypeError, 'not both');
  });

  it('weighs the extender so that one point of its 0..10 score beats every score plugin together', () => {
    // kube-scheduler 1.30 to 1.37: extender score * weight * (MaxNodeScore / MaxExtenderPriority);
    // plugins 0..100 * weight.
    const sumOfPluginWeights = Object.values(DEFAULT_SCORE_PLUGIN_WEIGHTS).reduce((sum, weight) => sum + weight, 0);
    expect(sumOfPluginWeights).to.equal(15);
    const onePoint = EXTENDER_WEIGHT * (MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY);
    expect(onePoint).to.be.above(sumOfPluginWeights * MAX_NODE_SCORE);
    expect((EXTENDER_WEIGHT - 1) * (MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY)).to.be.at.most(
      sumOfPluginWeights * MAX_NODE_SCORE,
    );
    for (const nodePolicy of ['binpack', 'spread'] as const)
      expect(built({ nodePolicy }).extenders[0]?.weight).to.equal(151);
  });

  it('binpack: breaks ties by packing (MostAllocated, no balanced allocation, no system default spreading)', () => {
    const [profile] = built({ nodePolicy: 'binpack' }).profiles;
    expect(argsOf(profile, 'NodeResourcesFit')).to.deep.equal({
      scoringStrategy: {
        type: 'MostAllocated',
        resources: [
          { name: 'cpu', weight: 1 },
          { name: 'memory', weight: 1 },
        ],
      },
    });
    expect(argsOf(profile, 'PodTopologySpread')).to.deep.equal({ defaultingType: 'List', defaultConstraints: [] });
    expect(profile?.plugins?.multiPoint?.disabled).to.deep.equal([{ name: 'NodeResourcesBalancedAllocation' }]);
  });

  it('spread: the stock plugins, with NodeResourcesFit LeastAllocated spelled out', () => {
    const [profile] = built({ nodePolicy: 'spread' }).profiles;
    expect(profile?.plugins).to.equal(undefined);
    expect(profile?.pluginConfig).to.deep.equal([
      {
        name: 'NodeResourcesFit',
        args: {
          scoringStrategy: {
            type: 'LeastAllocated',
            resources: [
              { name: 'cpu', weight: 1 },
              { name: 'memory', weight: 1 },
            ],
          },
        },
      },
    ]);
  });

  it('keeps the default-scheduler profile stock when asked for it', () => {
    for (const nodePolicy of ['binpack', 'spread'] as const) {
      const { profiles } = built({ nodePolicy, includeDefaultProfile: true });
      expect(profiles[0]).to.deep.equal({ schedulerName: 'default-scheduler' });
      expect(profiles[1]?.schedulerName).to.equal('gpu');
    }
  });
});
