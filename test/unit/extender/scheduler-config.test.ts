import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadYaml } from '@kubernetes/client-node';
import { expect } from 'chai';
import { kubeSchedulerConfiguration } from '../../../src/extender/scheduler-config.js';

describe('kube-scheduler configuration', () => {
  it('manifests/kube-scheduler-config.yaml is exactly what the code builds for the cluster', () => {
    const shipped = loadYaml(readFileSync(resolve(import.meta.dirname, '..', '..', '..', 'manifests', 'kube-scheduler-config.yaml'), 'utf8'));
    expect(shipped).to.deep.equal(kubeSchedulerConfiguration({
      schedulerName: 'hami-scheduler',
      extenderUrl: 'https://127.0.0.1:9444',
      leaderElection: { leaderElect: true, resourceNamespace: 'vgpu-warden', resourceName: 'vgpu-warden-scheduler' },
    }));
  });

  it('sends filter, prioritize and bind for the GPU resources only, ignored by the scheduler itself', () => {
    const config = kubeSchedulerConfiguration({ schedulerName: 'gpu', extenderUrl: 'https://127.0.0.1:1', caPem: 'PEM' }) as {
      profiles: { schedulerName: string }[];
      extenders: Record<string, unknown>[];
    };
    expect(config.profiles).to.deep.equal([{ schedulerName: 'gpu' }]);
    expect(config.extenders[0]).to.deep.include({ filterVerb: 'filter', prioritizeVerb: 'prioritize', bindVerb: 'bind', nodeCacheCapable: true, httpTimeout: '30s', enableHTTPS: true });
    expect(config.extenders[0]?.tlsConfig).to.deep.equal({ caData: Buffer.from('PEM').toString('base64') });
    expect((config.extenders[0]?.managedResources as { name: string; ignoredByScheduler: boolean }[]).every((resource) => resource.ignoredByScheduler)).to.equal(true);
  });
});
