/** Prints rows as an aligned text table. */
export function table(rows: Record<string, string>[], print: (line: string) => void): void {
  if (rows.length === 0) {
    print('(none)');
    return;
  }
  const columns = Object.keys(rows[0]!);
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  print(line(columns.map((c) => c.toUpperCase())));
  for (const row of rows) print(line(columns.map((c) => row[c] ?? '')));
}
