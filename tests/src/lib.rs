pub mod real_model;
