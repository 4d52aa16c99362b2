/**
 * A deployment's secrets as Postgres holds them (`control_plane.deployment_secrets`), read straight
 * from the table: what someone with the database but not the platform key would see.
 */
import pg from 'pg';

export async function storedSecrets(databaseUrl: string, deploymentId: string): Promise<Map<string, Buffer>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string; value_encrypted: Buffer }>(
      'SELECT name, value_encrypted FROM control_plane.deployment_secrets WHERE deployment_id = $1',
      [deploymentId],
    );
    return new Map(rows.map((r) => [r.name, r.value_encrypted]));
  } finally {
    await client.end();
  }
}
