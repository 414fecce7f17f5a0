import { expect } from 'chai';
import { chooseNodeMode, NodeModeError, parseNodeMode } from '../../../src/local/node-mode.js';

describe('local mode: real or simulated nodes', () => {
  const ready = { isRoot: true, toolsProblem: undefined };

  it('picks real nodes where the machine allows them, and says so in one line', () => {
    const choice = chooseNodeMode({ asked: undefined, ...ready });
    expect(choice.mode).to.equal('real');
    expect(choice.why).to.match(/^real nodes: root, kubelet and containerd are here/);
    expect(choice.why).to.not.include('\n');
  });

  it('falls back to simulated nodes and says why: not root, or a missing tool named', () => {
    expect(chooseNodeMode({ asked: undefined, isRoot: false, toolsProblem: undefined })).to.deep.equal({
      mode: 'simulated',
      why: 'simulated nodes (no kubelet: pods are allocated, never Running), because real nodes need root (mount and pid namespaces, cgroups, kubelet)',
    });
    const missing = chooseNodeMode({ asked: undefined, isRoot: true, toolsProblem: '/usr/sbin/runc is missing' });
    expect(missing.mode).to.equal('simulated');
    expect(missing.why).to.match(/because \/usr\/sbin\/runc is missing$/);
  });

  it('--nodes decides: simulated always; real only where it can run, else an error saying what is missing', () => {
    expect(chooseNodeMode({ asked: 'simulated', ...ready }).mode).to.equal('simulated');
    expect(chooseNodeMode({ asked: 'real', ...ready }).mode).to.equal('real');
    expect(() => chooseNodeMode({ asked: 'real', isRoot: false, toolsProblem: undefined })).to.throw(
      NodeModeError,
      '--nodes=real cannot run here: real nodes need root',
    );
    expect(() => chooseNodeMode({ asked: 'real', isRoot: true, toolsProblem: 'kubelet is not built' })).to.throw(
      NodeModeError,
      'kubelet is not built',
    );
  });

  it('reads only the two names', () => {
    expect(parseNodeMode('real')).to.equal('real');
    expect(parseNodeMode('simulated')).to.equal('simulated');
    expect(parseNodeMode('Real')).to.equal(undefined);
    expect(parseNodeMode('')).to.equal(undefined);
  });
});
