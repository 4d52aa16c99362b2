// usage: node setdeps.mjs <pkgdir> dep1 dep2 ...   (workspace deps: "@berth/x")
import { readFileSync, writeFileSync } from 'node:fs';
const [dir, ...deps] = process.argv.slice(2);
const file = `${dir}/package.json`;
const pkg = JSON.parse(readFileSync(file, 'utf8'));
pkg.dependencies = pkg.dependencies ?? {};
for (const d of deps) pkg.dependencies[d] = '*';
pkg.dependencies = Object.fromEntries(Object.entries(pkg.dependencies).sort());
writeFileSync(file, JSON.stringify(pkg, null, 2) + '\n');
const ts = JSON.parse(readFileSync(`${dir}/tsconfig.json`, 'utf8'));
const rootPkg = JSON.parse(readFileSync('package.json', 'utf8'));
const depth = dir.split('/').length;
const up = '../'.repeat(depth);
const map = { '@berth/local-stack': 'infra/local', '@berth/cli': 'cli', '@berth/proto': 'proto' };
ts.references = Object.keys(pkg.dependencies)
  .filter((d) => d.startsWith('@berth/'))
  .map((d) => {
    const name = d.slice(7);
    const target =
      map[d] ?? (['gateway', 'control-plane', 'agent-runtime', 'sandbox-manager', 'export-worker'].includes(name) ? `services/${name}` : `libs/${name}`);
    return { path: `${up}${target}` };
  });
if (!ts.references.length) delete ts.references;
writeFileSync(`${dir}/tsconfig.json`, JSON.stringify(ts, null, 2) + '\n');
