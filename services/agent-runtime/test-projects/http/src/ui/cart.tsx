/** UI entry `shop-cart` (not a graph id): a component with a stylesheet of its own. */
import { useState } from 'react';
import './cart.css';

const Cart = (props: { items: string[] }) => {
  const [open] = useState(true);
  return <ul className="cart">{open ? props.items.map((item) => <li key={item}>{item}</li>) : null}</ul>;
};

export default { cart: Cart };
