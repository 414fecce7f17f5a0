import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { slimNode, slimPod } from '../../../src/cluster/slim-objects.js';
import { podMatchesScope } from '../../../src/devices/quota-scopes.js';
import { lockWrittenAt } from '../../../src/lock/lock-written-at.js';

const lockEntry = {
  manager: 'vgpu-warden',
  operation: 'Update',
  time: new Date('2026-12-03T09:00:00Z'),
  fieldsV1: { 'f:metadata': { 'f:annotations': { 'f:hami.io/mutex.lock': {} } } },
};
const kubeletEntry = {
  manager: 'kubelet',
  operation: 'Update',
  time: new Date('2026-12-03T09:30:00Z'),
  fieldsV1: { 'f:status': { 'f:conditions': {} } },
};

describe('slimPod and slimNode (what the state store keeps)', () => {
  it("keeps of a pod what the store's readers use and leaves the watched object as it was", () => {
    const resources = { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2000' } };
    const startTime = new Date('2026-12-03T09:00:00Z');
    const initContainerStatuses = [
      { name: 'init', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0 } } },
    ];
    const pod: V1Pod = {
      metadata: {
        name: 'p',
        namespace: 'ns',
        uid: 'u',
        resourceVersion: '7',
        labels: { app: 'a' },
        annotations: { a: 'b' },
        deletionTimestamp: startTime,
        managedFields: [kubeletEntry],
      },
      spec: {
        nodeName: 'n1',
        schedulerName: 'hami-scheduler',
        priority: 5,
        initContainers: [
          { name: 'init', image: 'i', resources, restartPolicy: 'Always', env: [{ name: 'E', value: 'v' }] },
        ],
        containers: [
          {
            name: 'c',
            image: 'x',
            resources,
            command: ['sleep'],
            env: [{ name: 'E', value: 'v' }],
            volumeMounts: [{ name: 'v', mountPath: '/v' }],
            livenessProbe: { exec: { command: ['true'] } },
          },
        ],
        volumes: [{ name: 'v', projected: { sources: [] } }],
        tolerations: [{ key: 'k', operator: 'Exists' }],
        affinity: {},
        securityContext: {},
        topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'zone', whenUnsatisfiable: 'DoNotSchedule' }],
      },
      status: {
        phase: 'Running',
        startTime,
        reason: 'Evicted',
        initContainerStatuses,
        conditions: [{ type: 'Ready', status: 'True' }],
        podIPs: [{ ip: '10.0.0.1' }],
        containerStatuses: [],
      },
    };
    const before = JSON.stringify(pod);
    const slim = slimPod(pod);
    expect(slim).to.deep.equal({
      metadata: {
        name: 'p',
        namespace: 'ns',
        uid: 'u',
        resourceVersion: '7',
        labels: { app: 'a' },
        annotations: { a: 'b' },
        deletionTimestamp: startTime,
      },
      spec: {
        nodeName: 'n1',
        schedulerName: 'hami-scheduler',
        priority: 5,
        initContainers: [{ name: 'init', resources, restartPolicy: 'Always' }],
        containers: [{ name: 'c', resources }],
      },
      status: { phase: 'Running', startTime, reason: 'Evicted', initContainerStatuses },
    });
    expect(JSON.stringify(pod), 'the watched object is not changed').to.equal(before);
    expect(slimPod({ metadata: { name: 'q' } })).to.deep.equal({ metadata: { name: 'q' } });
    expect(slimPod(slim), 'slimming twice changes nothing').to.deep.equal(slim);
  });

  it("keeps what a ResourceQuota's scopes read: a slim pod matches the same scopes as the pod", () => {
    const term = {
      topologyKey: 'kubernetes.io/hostname',
      labelSelector: { matchLabels: { app: 'x' } },
      namespaces: ['other'],
    };
    const pod: V1Pod = {
      metadata: { name: 'p', namespace: 'ns', uid: 'u' },
      spec: {
        priorityClassName: 'high',
        priority: 1000,
        activeDeadlineSeconds: 600,
        resources: { requests: { cpu: '1' } },
        affinity: {
          podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term] },
          nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [] } },
        },
        containers: [
          { name: 'c', image: 'x', resources: { requests: { memory: '1Gi' }, limits: { 'nvidia.com/gpu': '1' } } },
        ],
      },
      status: { phase: 'Pending', qosClass: 'Burstable' },
    };
    const slim = slimPod(pod);
    expect(slim.spec?.affinity, 'pod (anti-)affinity only').to.deep.equal({
      podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term] },
    });
    expect([
      slim.spec?.activeDeadlineSeconds,
      slim.spec?.resources,
      slim.spec?.priorityClassName,
      slim.status?.qosClass,
    ]).to.deep.equal([600, { requests: { cpu: '1' } }, 'high', 'Burstable']);
    const scopes = ['Terminating', 'NotTerminating', 'BestEffort', 'NotBestEffort', 'CrossNamespacePodAffinity'].map(
      (scopeName) => ({ scopeName, operator: 'Exists' }),
    );
    const selectors = [
      ...scopes,
      { scopeName: 'PriorityClass', operator: 'In', values: ['high'] },
      { scopeName: 'PriorityClass', operator: 'NotIn', values: ['high'] },
    ];
    const withoutQos: V1Pod = { ...pod, status: { phase: 'Pending' } };
    for (const requirement of selectors) {
      expect(podMatchesScope(requirement, slim), JSON.stringify(requirement)).to.equal(
        podMatchesScope(requirement, pod),
      );
      expect(
        podMatchesScope(requirement, slimPod(withoutQos)),
        `${JSON.stringify(requirement)} from the resources`,
      ).to.equal(podMatchesScope(requirement, withoutQos));
    }
    expect(selectors.filter((requirement) => podMatchesScope(requirement, slim)).length, 'not vacuous').to.equal(4);
  });

  it('keeps only the node managedFields entries of the lock annotation (lockWrittenAt still reads them) and drops status.images', () => {
    const node: V1Node = {
      metadata: { name: 'n1', annotations: { 'hami.io/mutex.lock': 'x' }, managedFields: [kubeletEntry, lockEntry] },
      status: { images: [{ names: ['registry/image:1'], sizeBytes: 1 }], allocatable: { cpu: '8' } },
    };
    const slim = slimNode(node);
    expect(slim.metadata?.managedFields).to.deep.equal([lockEntry]);
    expect(slim.status).to.deep.equal({ allocatable: { cpu: '8' } });
    expect(lockWrittenAt(slim)).to.deep.equal(lockWrittenAt(node));
    expect(node.status?.images, 'the watched object is not changed').to.have.length(1);
    expect(slimNode({ metadata: { name: 'n2', managedFields: [kubeletEntry] } }).metadata).to.deep.equal({
      name: 'n2',
    });
  });
});
