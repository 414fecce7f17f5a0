import { expect } from 'chai';
import { DeviceManager, DevicesUnavailableError, hashSeed, seededRandom } from '../../support/kubelet-sim/index.js';

describe('kubelet simulator: device bookkeeping', () => {
  const ids = ['GPU-a-0', 'GPU-a-1', 'GPU-a-2'];

  it("hands out free device IDs, refuses with kubelet's message when too few are left, frees a pod's on its end", () => {
    const devices = new DeviceManager('nvidia.com/gpu', ids);
    expect(devices.take('pod-1', 2, false)).to.deep.equal(['GPU-a-0', 'GPU-a-1']);
    expect(() => devices.take('pod-2', 2, false)).to.throw(
      DevicesUnavailableError,
      'requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1',
    );
    expect(devices.available, 'a refused request holds nothing').to.equal(1);
    expect(devices.free('pod-1')).to.deep.equal(['GPU-a-0', 'GPU-a-1']);
    expect(devices.take('pod-2', 2, false)).to.deep.equal(['GPU-a-0', 'GPU-a-1']);
  });

  it("lets a pod's later containers reuse its init containers' devices, as kubelet does", () => {
    const devices = new DeviceManager('nvidia.com/gpu', ids);
    devices.take('pod-1', 2, true);
    expect(devices.take('pod-1', 3, false), 'two reused, one new').to.deep.equal(['GPU-a-0', 'GPU-a-1', 'GPU-a-2']);
    expect(devices.available).to.equal(0);
    expect(devices.heldBy('pod-1')).to.have.length(3);
  });
});

describe('kubelet simulator: seeded randomness', () => {
  it('replays the same sequence for the same seed, another for another', () => {
    const draw = (seed: number) => {
      const random = seededRandom(seed);
      return Array.from({ length: 5 }, random);
    };
    expect(draw(7)).to.deep.equal(draw(7));
    expect(draw(7)).to.not.deep.equal(draw(8));
    expect(draw(7).every((value) => value >= 0 && value < 1)).to.equal(true);
  });

  it('derives stable, distinct sub-seeds', () => {
    expect(hashSeed(1, 'pod', 'ns/a', 1)).to.equal(hashSeed(1, 'pod', 'ns/a', 1));
    expect(hashSeed(1, 'pod', 'ns/a', 1)).to.not.equal(hashSeed(1, 'pod', 'ns/a', 2));
  });
});
