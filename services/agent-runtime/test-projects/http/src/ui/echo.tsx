/** Generative UI of the `echo` graph: component `card`, rendered by the page's React. */
const Card = (props: { text: string }) => <div className="card">Echoed: {props.text}</div>;

export default { card: Card };
