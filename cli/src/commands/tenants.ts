/**
 * `berth tenants create|list` — needs an admin key of the system tenant (the bootstrap key).
 */
import type { CliEnv } from '../env.js';
import { gatewayClient, type ConnectionFlags } from '../connection.js';
import { table } from '../table.js';

interface Tenant {
  tenant_id: string;
  name: string;
  is_system: boolean;
  created_at: string;
}

type Print = (line: string) => void;

export async function tenantsCreate(env: CliEnv, flags: ConnectionFlags & { name: string; json?: boolean }, print: Print) {
  const client = await gatewayClient(env, flags);
  const created = await client.request<{ tenant: Tenant; api_key: { id: string; key: string } }>('POST', '/v1/tenants', {
    name: flags.name,
  });
  if (flags.json) {
    print(JSON.stringify(created));
  } else {
    print(`created tenant ${created.tenant.tenant_id} (${created.tenant.name})`);
    print(`  admin API key: ${created.api_key.key}`);
    print('This is the only time the key is shown: store it now.');
  }
  return created;
}

export async function tenantsList(env: CliEnv, flags: ConnectionFlags & { json?: boolean }, print: Print): Promise<Tenant[]> {
  const client = await gatewayClient(env, flags);
  const tenants: Tenant[] = [];
  for (let offset = 0; ;) {
    const page = await client.request<{ resources: Tenant[]; offset: number }>('GET', `/v1/tenants?limit=100&offset=${offset}`);
    tenants.push(...page.resources);
    if (page.resources.length < 100) break;
    offset = page.offset;
  }
  if (flags.json) print(JSON.stringify(tenants));
  else
    table(
      tenants.map((t) => ({ id: t.tenant_id, name: t.name, system: t.is_system ? 'yes' : '', created: t.created_at })),
      print,
    );
  return tenants;
}
