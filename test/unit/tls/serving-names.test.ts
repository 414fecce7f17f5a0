import { expect } from 'chai';
import { servingNames } from '../../../src/tls/serving-names.js';
import { canonicalHost } from '../../../src/base/net-hosts.js';
import { ServingNameError } from '../../../src/tls/tls-errors.js';

describe('servingNames', () => {
  it('lists every Service name form, then loopback, in a stable order', () => {
    expect(servingNames({ serviceName: 'vgpu-warden', namespace: 'kube-system', extraHosts: [] })).to.deep.equal([
      'vgpu-warden',
      'vgpu-warden.kube-system',
      'vgpu-warden.kube-system.svc',
      'vgpu-warden.kube-system.svc.cluster.local',
      'localhost',
      '127.0.0.1',
    ]);
  });

  it('appends extra hosts and IPs after the fixed names, without duplicates, keeping the first', () => {
    const names = servingNames({
      serviceName: 'svc',
      namespace: 'ns',
      extraHosts: [
        'webhook.example.com',
        '10.0.0.7',
        'localhost',
        'WEBHOOK.example.com',
        ' 10.0.0.7 ',
        '',
        '*.apps.example.com',
      ],
    });
    expect(names).to.deep.equal([
      'svc',
      'svc.ns',
      'svc.ns.svc',
      'svc.ns.svc.cluster.local',
      'localhost',
      '127.0.0.1',
      'webhook.example.com',
      '10.0.0.7',
      '*.apps.example.com',
    ]);
  });

  it('writes IPv6 addresses in one canonical spelling, so config and certificate compare equal', () => {
    const names = servingNames({
      serviceName: 'svc',
      namespace: 'ns',
      extraHosts: ['FD00:0:0:0:0:0:0:10', 'fd00::10', '::1'],
    });
    expect(names.slice(6)).to.deep.equal(['fd00::10', '::1']);
    expect(canonicalHost('0:0:0:0:0:0:0:1')).to.equal('::1');
    expect(canonicalHost('Example.COM')).to.equal('example.com');
    expect(canonicalHost('192.168.1.1')).to.equal('192.168.1.1');
  });

  it('refuses names that cannot be SANs or Service names', () => {
    expect(() => servingNames({ serviceName: 'Bad_Name', namespace: 'ns', extraHosts: [] })).to.throw(
      ServingNameError,
      /service name "Bad_Name"/,
    );
    expect(() => servingNames({ serviceName: 'svc', namespace: 'a'.repeat(64), extraHosts: [] })).to.throw(
      ServingNameError,
      /namespace/,
    );
    for (const host of ['bad host', 'under_score.example', 'a..b', '-lead.example', '010.0.0.1', 'http://x']) {
      expect(() => servingNames({ serviceName: 'svc', namespace: 'ns', extraHosts: [host] }), host).to.throw(
        ServingNameError,
        /invalid host/,
      );
    }
  });
});
