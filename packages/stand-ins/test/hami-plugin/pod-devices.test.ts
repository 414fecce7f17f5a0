import { expect } from 'chai';
import {
  decodePodDevices,
  encodePodDevices,
  eraseNextDeviceRequest,
  MISSING_FIELDS,
  nextDeviceRequest,
  PodDevicesFormatError,
} from '../../src/hami-plugin/index.js';

// Examples from hami-wire-contract.md §4.6, §5 and Appendix A; no src/ import here.
const APPENDIX_A_UUID = 'GPU-aaaa1111-2222-3333-4444-555566667777';

describe('HAMi stand-in: hami.io/vgpu-devices-to-allocate codec', () => {
  it('decodes the Appendix A value, keeping the empty piece after the terminating ";"', () => {
    expect(decodePodDevices(`${APPENDIX_A_UUID},NVIDIA,3000,0:;`)).to.deep.equal([
      [{ uuid: APPENDIX_A_UUID, type: 'NVIDIA', usedMem: 3000, usedCores: 0 }],
      [],
    ]);
  });

  it('keeps a GPU-less container as an empty piece at its position (containers [no GPU, 2 GPUs])', () => {
    const entries = decodePodDevices(';GPU-a,NVIDIA,2000,0:GPU-b,NVIDIA,2000,0:;');
    expect(entries.map((devices) => devices.map((device) => device.uuid))).to.deep.equal([[], ['GPU-a', 'GPU-b'], []]);
  });

  it('skips parts without a comma and ignores fields after the fourth', () => {
    expect(decodePodDevices('GPU-a,NVIDIA,1000,30,extra,more:junk:;')).to.deep.equal([
      [{ uuid: 'GPU-a', type: 'NVIDIA', usedMem: 1000, usedCores: 30 }],
      [],
    ]);
  });

  it("refuses a device with fewer than 4 fields with HAMi's message", () => {
    expect(() => decodePodDevices('GPU-a,NVIDIA,1000:;')).to.throw(PodDevicesFormatError, MISSING_FIELDS);
  });

  it('requires int32 memory and cores, as strconv.ParseInt(_, 10, 32) does (negative included)', () => {
    expect(() => decodePodDevices('GPU-a,NVIDIA,abc,0:;')).to.throw(PodDevicesFormatError, 'invalid syntax');
    expect(() => decodePodDevices('GPU-a,NVIDIA,2147483648,0:;')).to.throw(PodDevicesFormatError, 'out of range');
    expect(decodePodDevices('GPU-a,NVIDIA,-5,+7:;')[0]).to.deep.equal([
      { uuid: 'GPU-a', type: 'NVIDIA', usedMem: -5, usedCores: 7 },
    ]);
  });

  it('grows by one ";" per rewrite, as the plugin\'s consumption does (§5 step 4)', () => {
    const consume = (value: string) => encodePodDevices(eraseNextDeviceRequest(decodePodDevices(value)));
    expect(consume(';GPU-a,NVIDIA,1000,30:;')).to.equal(';;;');
    expect(consume('GPU-a,NVIDIA,1000,0:;')).to.equal(';;');
    expect(consume(`${APPENDIX_A_UUID},NVIDIA,3000,0:;`)).to.equal(';;');
  });

  it('re-encodes a decoded value with one ";" more, even with nothing consumed (the kept empty piece)', () => {
    for (const value of [';GPU-a,NVIDIA,2000,0:GPU-b,NVIDIA,2000,0:;', 'GPU-a,NVIDIA,1,2:;GPU-b,NVIDIA,3,4:;', ';;']) {
      expect(encodePodDevices(decodePodDevices(value))).to.equal(`${value};`);
    }
  });

  it('takes the first non-empty piece as the next request, consuming containers in order', () => {
    let value = 'GPU-a,NVIDIA,1000,10:;;GPU-b,NVIDIA,2000,20:GPU-c,NVIDIA,2000,20:;';
    const seen: { index: number; uuids: string[] }[] = [];
    for (;;) {
      const entries = decodePodDevices(value);
      const next = nextDeviceRequest(entries);
      if (next === undefined) break;
      seen.push({ index: next.index, uuids: next.devices.map((device) => device.uuid) });
      value = encodePodDevices(eraseNextDeviceRequest(entries));
    }
    expect(seen).to.deep.equal([
      { index: 0, uuids: ['GPU-a'] },
      { index: 2, uuids: ['GPU-b', 'GPU-c'] },
    ]);
    expect(value).to.equal(';;;;;');
    expect(value.includes('NVIDIA')).to.equal(false);
  });

  it('hands out only NVIDIA devices of the next piece and erases only those', () => {
    const entries = decodePodDevices('GPU-a,NVIDIA,1,1:MLU-x,MLU,1,1:;');
    expect(nextDeviceRequest(entries)?.devices.map((device) => device.uuid)).to.deep.equal(['GPU-a']);
    expect(encodePodDevices(eraseNextDeviceRequest(entries))).to.equal('MLU-x,MLU,1,1:;;');
  });

  it('finds no request in a fully consumed or empty value', () => {
    expect(nextDeviceRequest(decodePodDevices(';;'))).to.equal(undefined);
    expect(nextDeviceRequest(decodePodDevices(''))).to.equal(undefined);
  });
});
