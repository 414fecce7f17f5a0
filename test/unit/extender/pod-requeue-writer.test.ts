import type { CoreV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { podRequeueWriter } from '../../../src/extender/pod-requeue-writer.js';

describe('podRequeueWriter (the requeue annotation of RefusalRequeue)', () => {
  it('writes the time of its clock on exactly this incarnation (the uid is a precondition)', async () => {
    const requests: unknown[] = [];
    const core = {
      patchNamespacedPod: (request: unknown) => {
        requests.push(request);
        return Promise.resolve({});
      },
    } as unknown as CoreV1Api;
    const at = Date.parse('2026-01-02T03:04:05.678Z');
    await podRequeueWriter(core, () => at)({ namespace: 'ns', name: 'p', uid: 'uid-p' });
    expect(requests).to.deep.equal([
      {
        name: 'p',
        namespace: 'ns',
        body: {
          metadata: { uid: 'uid-p', annotations: { 'hami.io/vgpu-warden-requeue': '2026-01-02T03:04:05.678Z' } },
        },
      },
    ]);
  });
});
