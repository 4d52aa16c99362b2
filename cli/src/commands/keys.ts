/**
 * `berth keys create|list|revoke` — API keys of a tenant (the key's own tenant by default).
 */
import type { CliEnv } from '../env.js';
import { gatewayClient, targetTenant, type ConnectionFlags } from '../connection.js';
import { table } from '../table.js';

interface ApiKey {
  id: string;
  tenant_id: string;
  name: string;
  role: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  key?: string;
}

type Print = (line: string) => void;

export async function keysCreate(
  env: CliEnv,
  flags: ConnectionFlags & { name: string; role?: string; expiresAt?: string; json?: boolean },
  print: Print,
): Promise<ApiKey> {
  const client = await gatewayClient(env, flags);
  const tenant = await targetTenant(client, flags.tenant);
  const created = await client.request<ApiKey>('POST', `/v1/tenants/${tenant}/api-keys`, {
    name: flags.name,
    ...(flags.role ? { role: flags.role } : {}),
    ...(flags.expiresAt ? { expires_at: flags.expiresAt } : {}),
  });
  if (flags.json) {
    print(JSON.stringify(created));
  } else {
    print(`created API key ${created.id} (${created.role}) for tenant ${created.tenant_id}`);
    print(`  ${created.key}`);
    print('This is the only time the key is shown: store it now.');
  }
  return created;
}

export async function keysList(env: CliEnv, flags: ConnectionFlags & { json?: boolean }, print: Print): Promise<ApiKey[]> {
  const client = await gatewayClient(env, flags);
  const tenant = await targetTenant(client, flags.tenant);
  const keys = await client.request<ApiKey[]>('GET', `/v1/tenants/${tenant}/api-keys`);
  if (flags.json) {
    print(JSON.stringify(keys));
  } else {
    table(
      keys.map((k) => ({
        id: k.id,
        name: k.name,
        role: k.role,
        prefix: `${k.prefix}…`,
        created: k.created_at,
        last_used: k.last_used_at ?? '-',
        status: k.revoked_at ? `revoked ${k.revoked_at}` : k.expires_at && Date.parse(k.expires_at) < Date.now() ? 'expired' : 'active',
      })),
      print,
    );
  }
  return keys;
}

export async function keysRevoke(env: CliEnv, flags: ConnectionFlags & { keyId: string; json?: boolean }, print: Print): Promise<ApiKey> {
  const client = await gatewayClient(env, flags);
  const tenant = await targetTenant(client, flags.tenant);
  const revoked = await client.request<ApiKey>('DELETE', `/v1/tenants/${tenant}/api-keys/${encodeURIComponent(flags.keyId)}`);
  print(flags.json ? JSON.stringify(revoked) : `revoked API key ${revoked.id} (${revoked.name})`);
  return revoked;
}
