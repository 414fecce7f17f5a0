import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { slimNode, slimPod } from '../../../src/cluster/slim-objects.js';
import { lockWrittenAt } from '../../../src/lock/lock-written-at.js';

const lockEntry = { manager: 'vgpu-warden', operation: 'Update', time: new Date('2026-12-03T09:00:00Z'), fieldsV1: { 'f:metadata': { 'f:annotations': { 'f:hami.io/mutex.lock': {} } } } };
const kubeletEntry = { manager: 'kubelet', operation: 'Update', time: new Date('2026-12-03T09:30:00Z'), fieldsV1: { 'f:status': { 'f:conditions': {} } } };

describe('slimPod and slimNode (what the state store keeps)', () => {
  it('drops a pod\'s managedFields and keeps everything else, leaving the watched object as it was', () => {
    const pod: V1Pod = { metadata: { name: 'p', namespace: 'ns', uid: 'u', annotations: { a: 'b' }, managedFields: [kubeletEntry] }, spec: { nodeName: 'n1', containers: [{ name: 'c' }] }, status: { phase: 'Running' } };
    const slim = slimPod(pod);
    expect(slim).to.deep.equal({ metadata: { name: 'p', namespace: 'ns', uid: 'u', annotations: { a: 'b' } }, spec: pod.spec, status: pod.status });
    expect(pod.metadata?.managedFields).to.have.length(1);
    const bare: V1Pod = { metadata: { name: 'q' } };
    expect(slimPod(bare)).to.equal(bare);
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
    expect(slimNode({ metadata: { name: 'n2', managedFields: [kubeletEntry] } }).metadata).to.deep.equal({ name: 'n2' });
  });
});
