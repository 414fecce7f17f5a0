import { expect } from 'chai';
import { parseHandshake } from '../../../src/cluster/node-liveness.js';
import {
  AllocateError,
  HamiDevicePlugin,
  MemoryPluginApi,
  reportedHandshake,
  requestingHandshake,
  wire,
} from '@vgpu-warden/stand-ins/hami-plugin';
import { DeviceManager } from '../../support/kubelet-sim/index.js';

const REGISTER = JSON.stringify([
  { id: 'GPU-a', count: 2, devmem: 24576, devcore: 100, type: 'NVIDIA-A10', health: true },
]);

describe("HAMi stand-in: a node's plugin stops reporting and reports again", () => {
  it('stopped: ListAndWatch lists nothing and Allocate fails Unavailable; back: both as before; listeners hear each change once', async () => {
    const api = new MemoryPluginApi();
    api.addNode('gpu-1', { [wire.NODE_REGISTER]: REGISTER });
    const plugin = new HamiDevicePlugin({ api, sleep: () => Promise.resolve() });
    const heard: string[] = [];
    plugin.onReportingChange((node, reporting) => {
      heard.push(`${node} ${String(reporting)}`);
    });
    expect(await plugin.listDevices('gpu-1')).to.deep.equal(['GPU-a-0', 'GPU-a-1']);

    plugin.stopReporting('gpu-1');
    plugin.stopReporting('gpu-1');
    expect(plugin.isReporting('gpu-1')).to.equal(false);
    expect(await plugin.listDevices('gpu-1')).to.deep.equal([]);
    const admitted = { namespace: 'ml', name: 'p', uid: 'u' };
    const failure = await plugin.allocate({ node: 'gpu-1', admitted, container: 'c', deviceIds: ['GPU-a-0'] }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).to.be.instanceOf(AllocateError);
    expect(failure).to.deep.include({ code: 'Unavailable', message: 'device plugin on gpu-1 is not running' });
    expect(plugin.records.at(-1)).to.deep.include({ outcome: 'failed', node: 'gpu-1' });
    expect(api.calls, 'a dead plugin reads and writes nothing').to.deep.equal(['readNode gpu-1']);

    plugin.reportAgain('gpu-1');
    plugin.reportAgain('gpu-1');
    expect(await plugin.listDevices('gpu-1')).to.deep.equal(['GPU-a-0', 'GPU-a-1']);
    expect(heard).to.deep.equal(['gpu-1 false', 'gpu-1 true']);
  });

  it("handshake values as a v2.7 plugin and HAMi's scheduler write them read back with the times they carry", () => {
    const at = new Date('2026-08-21T06:20:39.123Z');
    expect(reportedHandshake(at)).to.equal('Reported 2026-08-21 06:20:39.123000000 +0000 UTC m=+1104711.777756895');
    expect(parseHandshake(reportedHandshake(at))).to.deep.equal({ kind: 'reported', at });
    expect(parseHandshake(requestingHandshake(at))).to.deep.equal({
      kind: 'requesting',
      at: new Date('2026-08-21T06:20:39Z'),
    });
  });
});

describe('kubelet sim device manager: a new device list from ListAndWatch', () => {
  it('running pods keep their devices; only listed, unheld devices are handed out', () => {
    const devices = new DeviceManager('nvidia.com/gpu', ['d0', 'd1', 'd2']);
    expect(devices.take('pod-1', 1, false)).to.deep.equal(['d0']);
    devices.replaceDevices([]);
    expect(devices.available).to.equal(0);
    expect(() => devices.take('pod-2', 1, false)).to.throw(
      'requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0',
    );
    expect(devices.heldBy('pod-1')).to.deep.equal(['d0']);
    devices.replaceDevices(['d0', 'd1', 'd2']);
    expect(devices.available).to.equal(2);
    expect(devices.take('pod-2', 2, false)).to.deep.equal(['d1', 'd2']);
  });
});
