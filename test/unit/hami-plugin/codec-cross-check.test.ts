import { expect } from 'chai';
import { decodeAllocation, encodeAllocation, type PodAllocation } from '../../../src/devices/allocation-codec.js';
import {
  decodePodDevices,
  encodePodDevices,
  eraseNextDeviceRequest,
  nextDeviceRequest,
  type PodDeviceEntries,
} from '@vgpu-warden/stand-ins/hami-plugin';
import { seededRandom, type Random } from '../../support/kubelet-sim/index.js';

/**
 * Our codec (src/devices/allocation-codec.ts) against the stand-in's, written separately from the
 * wire contract: what one encodes the other must read as the same devices per container. A bug
 * shared by both sides would need the same mistake made twice; an asymmetry shows here.
 */
const int = (random: Random, max: number) => Math.floor(random() * (max + 1));

function randomAllocation(random: Random): PodAllocation {
  return Array.from({ length: 1 + int(random, 4) }, () =>
    // About a third of containers have no GPU, as sidecars and init containers often do not.
    random() < 0.35
      ? []
      : Array.from({ length: 1 + int(random, 3) }, () => ({
          uuid: `GPU-${int(random, 0xffff).toString(16)}-${int(random, 0xffffff).toString(16)}`,
          type: 'NVIDIA',
          memoryMiB: int(random, 81920),
          cores: int(random, 100),
        })),
  );
}

/** The contract's view of an allocation: one piece per container plus the empty one after the last ';'. */
function asEntries(allocation: PodAllocation): PodDeviceEntries {
  return [
    ...allocation.map((devices) =>
      devices.map((device) => ({
        uuid: device.uuid,
        type: device.type,
        usedMem: device.memoryMiB,
        usedCores: device.cores,
      })),
    ),
    [],
  ];
}

describe('allocation codec cross-check: src/ against the HAMi stand-in', () => {
  const random = seededRandom(20260821);
  const allocations = Array.from({ length: 200 }, () => randomAllocation(random));

  it('the stand-in decodes what src/ encodes, container by container (200 seeded allocations)', () => {
    for (const allocation of allocations) {
      const encoded = encodeAllocation(allocation);
      expect(decodePodDevices(encoded), encoded).to.deep.equal(asEntries(allocation));
    }
  });

  it('src/ decodes what the stand-in encodes to the same allocation', () => {
    for (const allocation of allocations) {
      const encoded = encodePodDevices(asEntries(allocation).slice(0, -1));
      expect(encoded).to.equal(encodeAllocation(allocation));
      expect(decodeAllocation(encoded), encoded).to.deep.equal(allocation);
    }
  });

  it("the plugin consumes src/'s value container by container, each container's devices in order", () => {
    for (const allocation of allocations) {
      let value = encodeAllocation(allocation);
      const handedOut: { index: number; uuids: string[] }[] = [];
      for (
        let next = nextDeviceRequest(decodePodDevices(value));
        next !== undefined;
        next = nextDeviceRequest(decodePodDevices(value))
      ) {
        handedOut.push({ index: next.index, uuids: next.devices.map((device) => device.uuid) });
        value = encodePodDevices(eraseNextDeviceRequest(decodePodDevices(value)));
      }
      const expected = allocation.flatMap((devices, index) =>
        devices.length === 0 ? [] : [{ index, uuids: devices.map((device) => device.uuid) }],
      );
      expect(handedOut).to.deep.equal(expected);
      expect(value.includes('NVIDIA'), 'nothing NVIDIA left: the plugin would release the lock').to.equal(false);
    }
  });

  it('both refuse a device with fewer than 4 fields', () => {
    expect(() => decodePodDevices('GPU-a,NVIDIA,1000:;')).to.throw();
    expect(decodeAllocation('GPU-a,NVIDIA,1000:;')).to.have.property('error');
  });
});
