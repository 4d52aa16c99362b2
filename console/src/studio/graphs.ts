/** The agent server's graphs, which several of Studio's tabs offer to choose from. */
import { useQuery } from '@tanstack/react-query';
import { useStudio } from './context';

export interface StudioGraph {
  graphId: string;
  /** The graph's system assistant. */
  assistantId: string;
}

/** The graphs of the project, by name: one system assistant per graph (the agent server makes them at start). */
export function useGraphs() {
  const { client, target } = useStudio();
  return useQuery({
    queryKey: ['studio', target.key, 'graphs'],
    queryFn: async ({ signal }): Promise<StudioGraph[]> => {
      const found = await client.assistants.search({ metadata: { created_by: 'system' }, limit: 100, signal });
      return found.map((a) => ({ graphId: a.graph_id, assistantId: a.assistant_id })).sort((a, b) => a.graphId.localeCompare(b.graphId));
    },
  });
}
