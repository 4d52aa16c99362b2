/**
 * Reports who runs it: the authenticated user that the agent server put into
 * `config.configurable` (`langgraph_auth_user_id`, `langgraph_auth_permissions`,
 * `langgraph_auth_user` and its platform-interface twin `graph_auth_user`).
 */
import { Annotation, StateGraph, type LangGraphRunnableConfig } from '@langchain/langgraph';

const State = Annotation.Root({
  user_id: Annotation<string | null>,
  permissions: Annotation<string[]>,
  org: Annotation<string | null>,
  kind: Annotation<string | null>,
  same_user: Annotation<boolean>,
});

type User = { identity: string; org?: string; kind?: string };

export const graph = new StateGraph(State)
  .addNode('whoami', (_state: typeof State.State, config: LangGraphRunnableConfig) => {
    const configurable = config.configurable ?? {};
    const user = configurable.langgraph_auth_user as User | undefined;
    const twin = configurable.graph_auth_user as User | undefined;
    return {
      user_id: (configurable.langgraph_auth_user_id as string | undefined) ?? null,
      permissions: (configurable.langgraph_auth_permissions as string[] | undefined) ?? [],
      org: user?.org ?? null,
      kind: user?.kind ?? null,
      same_user: user !== undefined && twin?.identity === user.identity,
    };
  })
  .addEdge('__start__', 'whoami')
  .addEdge('whoami', '__end__')
  .compile();
