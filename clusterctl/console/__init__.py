"""The web console (`clusterctl ui`, and the offline profile's kafka-manager service): pages over the domain layer."""
